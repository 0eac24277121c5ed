"""Tokenizers: byte-level BPE and BERT WordPiece (training, encoding, Hugging Face wrappers) and word counting."""

from .bpe import BPETokenizer
from .bpe_train import train_bpe, train_bpe_from_counts, train_bpe_from_iterator
from .tokenization_tinylm import TinyLMTokenizer
from .tokenization_tinylm_fast import TinyLMTokenizerFast
from .tokenization_tinylm_wordpiece import TinyLMWordPieceTokenizer
from .tokenization_tinylm_wordpiece_fast import TinyLMWordPieceTokenizerFast
from .word_counts import WordCounts, count_words, load_word_counts, save_word_counts, sum_word_counts
from .wordpiece import WordPieceTokenizer
from .wordpiece_train import train_wordpiece, train_wordpiece_from_counts, train_wordpiece_from_iterator

__all__ = [
    "BPETokenizer",
    "TinyLMTokenizer",
    "TinyLMTokenizerFast",
    "TinyLMWordPieceTokenizer",
    "TinyLMWordPieceTokenizerFast",
    "WordCounts",
    "WordPieceTokenizer",
    "count_words",
    "load_word_counts",
    "save_word_counts",
    "sum_word_counts",
    "train_bpe",
    "train_bpe_from_counts",
    "train_bpe_from_iterator",
    "train_wordpiece",
    "train_wordpiece_from_counts",
    "train_wordpiece_from_iterator",
]
