"""tinylm_hf: train a small language model from scratch that lives natively in Hugging Face."""

from __future__ import annotations

from .modeling import TinyLMConfig
from .tokenization import BPETokenizer
from .training import AdamW, clip_grad_norm, cosine_lr, cross_entropy, param_groups_for_weight_decay

__version__ = "0.1.0"

__all__ = [
    "AdamW",
    "BPETokenizer",
    "TinyLMConfig",
    "__version__",
    "clip_grad_norm",
    "cosine_lr",
    "cross_entropy",
    "param_groups_for_weight_decay",
]
