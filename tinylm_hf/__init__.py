"""tinylm_hf: train a small language model from scratch that lives natively in Hugging Face.

Importing the package registers TinyLM's config, models and tokenizer with the transformers Auto
classes (`tinylm_hf.registration`).
"""

from __future__ import annotations

from .corpus import prepare_dataset, split_documents
from .modeling import (
    TinyLMConfig,
    TinyLMForCausalLM,
    TinyLMForMaskedLM,
    TinyLMModel,
    TinyLMPreTrainedModel,
    scaled_dot_product_attention,
    softmax,
)
from .registration import register
from .tokenization import (
    EOS_TOKEN,
    BPETokenizer,
    TinyLMTokenizer,
    TinyLMTokenizerFast,
    train_bpe,
    train_bpe_from_counts,
    train_tokenizer,
)
from .training import (
    AdamW,
    MLMCollator,
    RunSummary,
    TrainConfig,
    clip_grad_norm,
    cosine_lr,
    cross_entropy,
    get_batch,
    load_checkpoint,
    param_groups_for_weight_decay,
    save_checkpoint,
    train,
    train_step,
)

register()

__version__ = "0.1.0"

__all__ = [
    "EOS_TOKEN",
    "AdamW",
    "BPETokenizer",
    "MLMCollator",
    "RunSummary",
    "TinyLMConfig",
    "TinyLMForCausalLM",
    "TinyLMForMaskedLM",
    "TinyLMModel",
    "TinyLMPreTrainedModel",
    "TinyLMTokenizer",
    "TinyLMTokenizerFast",
    "TrainConfig",
    "__version__",
    "clip_grad_norm",
    "cosine_lr",
    "cross_entropy",
    "get_batch",
    "load_checkpoint",
    "param_groups_for_weight_decay",
    "prepare_dataset",
    "register",
    "save_checkpoint",
    "scaled_dot_product_attention",
    "softmax",
    "split_documents",
    "train",
    "train_bpe",
    "train_bpe_from_counts",
    "train_step",
    "train_tokenizer",
]
