"""TinyLMConfig: the single source of truth for a TinyLM model's shape (a transformers PretrainedConfig)."""

from __future__ import annotations

from transformers import PretrainedConfig


class TinyLMConfig(PretrainedConfig):
    """Configuration of a TinyLM decoder (Llama-style: RMSNorm, RoPE, SwiGLU, causal MHA)."""

    model_type = "tinylm"
    keys_to_ignore_at_inference = ["past_key_values"]

    def __init__(
        self,
        vocab_size: int = 10000,
        hidden_size: int = 512,
        intermediate_size: int = 1344,
        num_hidden_layers: int = 4,
        num_attention_heads: int = 16,
        max_position_embeddings: int = 256,
        rope_theta: float = 10000.0,
        rms_norm_eps: float = 1e-5,
        tie_word_embeddings: bool = False,
        initializer_range: float = 0.02,
        use_cache: bool = True,
        bos_token_id: int | None = None,
        eos_token_id: int | None = None,
        pad_token_id: int | None = None,
        **kwargs,
    ) -> None:
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.intermediate_size = intermediate_size
        self.num_hidden_layers = num_hidden_layers
        self.num_attention_heads = num_attention_heads
        self.max_position_embeddings = max_position_embeddings
        self.rope_theta = rope_theta
        self.rms_norm_eps = rms_norm_eps
        self.initializer_range = initializer_range
        self.use_cache = use_cache
        super().__init__(
            bos_token_id=bos_token_id,
            eos_token_id=eos_token_id,
            pad_token_id=pad_token_id,
            tie_word_embeddings=tie_word_embeddings,
            **kwargs,
        )
