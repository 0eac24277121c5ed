"""tinylm_hf: train a small language model from scratch that lives natively in Hugging Face."""

from __future__ import annotations

from .modeling import TinyLMConfig
from .tokenization import BPETokenizer

__version__ = "0.1.0"

__all__ = ["BPETokenizer", "TinyLMConfig", "__version__"]
