"""tinylm_hf: train a small language model from scratch that lives natively in Hugging Face."""

from __future__ import annotations

from .modeling import TinyLMConfig
from .tokenization import BPETokenizer, train_bpe, train_bpe_from_counts

__version__ = "0.1.0"

__all__ = ["BPETokenizer", "TinyLMConfig", "__version__", "train_bpe", "train_bpe_from_counts"]
