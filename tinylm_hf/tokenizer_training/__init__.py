"""Tokenizer training: word counting, the four families' trainers, and `train_tokenizer` over them.

Nothing here runs when a saved tokenizer encodes text, and transformers never copies it into a saved
folder: what a folder needs lives in `tinylm_hf.tokenization`, whose modules import nothing from here
(its package `__init__` only forwards the training names it used to export).
"""

from .bpe_train import train_bpe, train_bpe_from_counts, train_bpe_from_iterator
from .metaspace_train import split_metaspace_words
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
