"""Byte-level BPE: training (`train_bpe`), encoding (`BPETokenizer`) and the Hugging Face wrappers."""

from .bpe import BPETokenizer
from .bpe_train import train_bpe, train_bpe_from_counts
from .tokenization_tinylm import TinyLMTokenizer
from .tokenization_tinylm_fast import TinyLMTokenizerFast

__all__ = ["BPETokenizer", "TinyLMTokenizer", "TinyLMTokenizerFast", "train_bpe", "train_bpe_from_counts"]
