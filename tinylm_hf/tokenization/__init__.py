"""Byte-level BPE: training (`train_bpe`), encoding (`BPETokenizer`) and the Hugging Face wrappers."""

from .bpe import BPETokenizer
from .bpe_train import train_bpe, train_bpe_from_counts

__all__ = ["BPETokenizer", "train_bpe", "train_bpe_from_counts"]
