"""The TinyLM model: config, hand-written layers, and the transformers model classes.

Registration with the Auto classes lives in `tinylm_hf.registration`.
"""

from __future__ import annotations

from .configuration_tinylm import PRESETS, TinyLMConfig
from .layers import (
    CausalSelfAttention,
    DecoderBlock,
    RMSNorm,
    RotaryEmbedding,
    SwiGLU,
    apply_rotary,
    apply_rotary_interleaved,
    scaled_dot_product_attention,
    silu,
    softmax,
)
from .modeling_tinylm import TinyLMForCausalLM, TinyLMModel, TinyLMPreTrainedModel
from .modeling_tinylm_heads import (
    TinyLMForQuestionAnswering,
    TinyLMForSequenceClassification,
    TinyLMForTokenClassification,
)
from .modeling_tinylm_mlm import TinyLMForMaskedLM

__all__ = [
    "PRESETS",
    "CausalSelfAttention",
    "DecoderBlock",
    "RMSNorm",
    "RotaryEmbedding",
    "SwiGLU",
    "TinyLMConfig",
    "TinyLMForCausalLM",
    "TinyLMForMaskedLM",
    "TinyLMForQuestionAnswering",
    "TinyLMForSequenceClassification",
    "TinyLMForTokenClassification",
    "TinyLMModel",
    "TinyLMPreTrainedModel",
    "apply_rotary",
    "apply_rotary_interleaved",
    "scaled_dot_product_attention",
    "silu",
    "softmax",
]
