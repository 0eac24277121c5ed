"""Tokenizers: byte-level BPE (`train_bpe`, `BPETokenizer`), Unigram and SentencePiece BPE, and their HF classes."""

from .bpe import BPETokenizer
from .bpe_train import train_bpe, train_bpe_from_counts
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
from .train_tokenizer import build_hf_tokenizer, train_tokenizer
from .unigram import UnigramTokenizer
from .unigram_train import train_unigram, train_unigram_from_counts, train_unigram_from_iterator

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
    "UnigramTokenizer",
    "build_hf_tokenizer",
    "split_metaspace_words",
    "train_bpe",
    "train_bpe_from_counts",
    "train_sentencepiece_bpe",
    "train_sentencepiece_bpe_from_counts",
    "train_sentencepiece_bpe_from_iterator",
    "train_tokenizer",
    "train_unigram",
    "train_unigram_from_counts",
    "train_unigram_from_iterator",
]
