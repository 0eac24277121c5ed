"""Byte-level BPE: training (`train_bpe`), encoding (`BPETokenizer`) and the Hugging Face wrappers."""

from .bpe import BPETokenizer

__all__ = ["BPETokenizer"]
