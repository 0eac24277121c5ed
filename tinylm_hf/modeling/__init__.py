"""The TinyLM model: config, hand-written layers, and the transformers model classes.

Registration with the Auto classes lives in `tinylm_hf.registration`. Names are imported on first use.
"""

from __future__ import annotations

from ..lazy_exports import export_lazily

__all__ = export_lazily(__name__, {
    ".configuration_tinylm": ("PRESETS", "TinyLMConfig"),
    ".layers": (
        "CausalSelfAttention", "DecoderBlock", "RMSNorm", "RotaryEmbedding", "SwiGLU", "apply_rotary",
        "apply_rotary_interleaved", "scaled_dot_product_attention", "silu", "softmax",
    ),
    ".modeling_tinylm": ("TinyLMForCausalLM", "TinyLMModel", "TinyLMPreTrainedModel"),
    ".modeling_tinylm_heads": (
        "TinyLMForQuestionAnswering", "TinyLMForSequenceClassification", "TinyLMForTokenClassification",
    ),
    ".modeling_tinylm_mlm": ("TinyLMForMaskedLM",),
})
