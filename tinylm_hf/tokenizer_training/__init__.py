"""Tokenizer training: word counting, the four families' trainers, and `train_tokenizer` over them.

Nothing here runs when a saved tokenizer encodes text, and transformers never copies it into a saved
folder: what a folder needs lives in `tinylm_hf.tokenization`, which never imports this package.
"""

from .bpe_train import train_bpe, train_bpe_from_counts, train_bpe_from_iterator
from .sentencepiece_bpe_train import (
    train_sentencepiece_bpe,
    train_sentencepiece_bpe_from_counts,
    train_sentencepiece_bpe_from_iterator,
)
from .train_tokenizer import build_hf_tokenizer, train_tokenizer
from .unigram_train import train_unigram, train_unigram_from_counts, train_unigram_from_iterator
from .word_counts import WordCounts, count_words, load_word_counts, save_word_counts, sum_word_counts
from .wordpiece_train import train_wordpiece, train_wordpiece_from_counts, train_wordpiece_from_iterator

__all__ = [
    "WordCounts",
    "build_hf_tokenizer",
    "count_words",
    "load_word_counts",
    "save_word_counts",
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
