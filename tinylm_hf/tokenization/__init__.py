"""Tokenizers trained from scratch: byte-level BPE, WordPiece, Unigram and SentencePiece-style BPE, each with
Hugging Face classes (slow and a `tokenizers` twin), and word counting for training on shards."""

from .bpe import BPETokenizer
from .bpe_train import train_bpe, train_bpe_from_counts, train_bpe_from_iterator
from .metaspace import SPACE_SYMBOL, split_metaspace_words
from .pretokenize import EOS_TOKEN
from .sentencepiece_bpe import SentencePieceBPETokenizer
from .sentencepiece_bpe_train import (
    train_sentencepiece_bpe,
    train_sentencepiece_bpe_from_counts,
    train_sentencepiece_bpe_from_iterator,
)
from .tokenization_tinylm import TinyLMTokenizer
from .tokenization_tinylm_fast import TinyLMTokenizerFast
from .tokenization_tinylm_sentencepiece_bpe import TinyLMSentencePieceBPETokenizer
from .tokenization_tinylm_sentencepiece_bpe_fast import TinyLMSentencePieceBPETokenizerFast
from .tokenization_tinylm_unigram import TinyLMUnigramTokenizer
from .tokenization_tinylm_unigram_fast import TinyLMUnigramTokenizerFast
from .tokenization_tinylm_wordpiece import TinyLMWordPieceTokenizer
from .tokenization_tinylm_wordpiece_fast import TinyLMWordPieceTokenizerFast
from .train_tokenizer import build_hf_tokenizer, train_tokenizer
from .unigram import UnigramTokenizer
from .unigram_train import train_unigram, train_unigram_from_counts, train_unigram_from_iterator
from .word_counts import WordCounts, count_words, load_word_counts, save_word_counts, sum_word_counts
from .wordpiece import WordPieceTokenizer
from .wordpiece_train import train_wordpiece, train_wordpiece_from_counts, train_wordpiece_from_iterator

__all__ = [
    "EOS_TOKEN",
    "BPETokenizer",
    "SPACE_SYMBOL",
    "SentencePieceBPETokenizer",
    "TinyLMSentencePieceBPETokenizer",
    "TinyLMSentencePieceBPETokenizerFast",
    "TinyLMTokenizer",
    "TinyLMTokenizerFast",
    "TinyLMUnigramTokenizer",
    "TinyLMUnigramTokenizerFast",
    "TinyLMWordPieceTokenizer",
    "TinyLMWordPieceTokenizerFast",
    "UnigramTokenizer",
    "WordCounts",
    "WordPieceTokenizer",
    "build_hf_tokenizer",
    "count_words",
    "load_word_counts",
    "save_word_counts",
    "split_metaspace_words",
    "sum_word_counts",
    "train_bpe",
    "train_bpe_from_counts",
    "train_bpe_from_iterator",
    "train_sentencepiece_bpe",
    "train_sentencepiece_bpe_from_counts",
    "train_sentencepiece_bpe_from_iterator",
    "train_tokenizer",
    "train_unigram",
    "train_unigram_from_counts",
    "train_unigram_from_iterator",
    "train_wordpiece",
    "train_wordpiece_from_counts",
    "train_wordpiece_from_iterator",
]
