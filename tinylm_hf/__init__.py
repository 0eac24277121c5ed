"""tinylm_hf: train a small language model from scratch that lives natively in Hugging Face."""

from __future__ import annotations

from .modeling import (
    TinyLMConfig,
    TinyLMForCausalLM,
    TinyLMModel,
    TinyLMPreTrainedModel,
    scaled_dot_product_attention,
    softmax,
)
from .tokenization import BPETokenizer

__version__ = "0.1.0"

__all__ = [
    "BPETokenizer",
    "TinyLMConfig",
    "TinyLMForCausalLM",
    "TinyLMModel",
    "TinyLMPreTrainedModel",
    "__version__",
    "scaled_dot_product_attention",
    "softmax",
]
