"""The TinyLM model: config, hand-written layers, and the transformers model classes.

Importing this package registers TinyLM with the transformers auto classes (``AutoConfig``,
``AutoModel``, ``AutoModelForCausalLM``) and marks the classes for ``save_pretrained`` to copy their
code into saved folders (``auto_map``), so those folders also load with ``trust_remote_code=True``
where tinylm_hf is not installed.
"""

from __future__ import annotations

from transformers import AutoConfig, AutoModel, AutoModelForCausalLM

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

AutoConfig.register(TinyLMConfig.model_type, TinyLMConfig, exist_ok=True)
AutoModel.register(TinyLMConfig, TinyLMModel, exist_ok=True)
AutoModelForCausalLM.register(TinyLMConfig, TinyLMForCausalLM, exist_ok=True)
TinyLMConfig.register_for_auto_class("AutoConfig")
TinyLMModel.register_for_auto_class("AutoModel")
TinyLMForCausalLM.register_for_auto_class("AutoModelForCausalLM")

__all__ = [
    "PRESETS",
    "CausalSelfAttention",
    "DecoderBlock",
    "RMSNorm",
    "RotaryEmbedding",
    "SwiGLU",
    "TinyLMConfig",
    "TinyLMForCausalLM",
    "TinyLMModel",
    "TinyLMPreTrainedModel",
    "apply_rotary",
    "apply_rotary_interleaved",
    "scaled_dot_product_attention",
    "silu",
    "softmax",
]
