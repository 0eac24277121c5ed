"""Byte-level BPE: training (`train_bpe`), encoding (`BPETokenizer`) and the Hugging Face wrappers."""

from .bpe import BPETokenizer
from .tokenization_tinylm import TinyLMTokenizer
from .tokenization_tinylm_fast import TinyLMTokenizerFast

__all__ = ["BPETokenizer", "TinyLMTokenizer", "TinyLMTokenizerFast"]
