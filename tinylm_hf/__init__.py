"""tinylm_hf: train a small language model from scratch that lives natively in Hugging Face."""

from __future__ import annotations

from transformers import AutoTokenizer

from .modeling import (
    TinyLMConfig,
    TinyLMForCausalLM,
    TinyLMModel,
    TinyLMPreTrainedModel,
    scaled_dot_product_attention,
    softmax,
)
from .tokenization import BPETokenizer, TinyLMTokenizer, TinyLMTokenizerFast, train_bpe, train_bpe_from_counts
from .training import (
    AdamW,
    TrainConfig,
    clip_grad_norm,
    cosine_lr,
    cross_entropy,
    get_batch,
    load_checkpoint,
    param_groups_for_weight_decay,
    save_checkpoint,
)

# AutoTokenizer returns the from-scratch slow tokenizer; the fast twin is loaded by its own class.
AutoTokenizer.register(TinyLMConfig, slow_tokenizer_class=TinyLMTokenizer, exist_ok=True)
TinyLMTokenizer.register_for_auto_class("AutoTokenizer")

__version__ = "0.1.0"

__all__ = [
    "AdamW",
    "TrainConfig",
    "BPETokenizer",
    "TinyLMConfig",
    "TinyLMForCausalLM",
    "TinyLMModel",
    "TinyLMPreTrainedModel",
    "TinyLMTokenizer",
    "TinyLMTokenizerFast",
    "__version__",
    "clip_grad_norm",
    "cosine_lr",
    "cross_entropy",
    "get_batch",
    "load_checkpoint",
    "param_groups_for_weight_decay",
    "save_checkpoint",
    "scaled_dot_product_attention",
    "softmax",
    "train_bpe",
    "train_bpe_from_counts",
]
