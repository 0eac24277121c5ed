"""TinyLMConfig: the single source of truth for a TinyLM model's shape (a transformers PretrainedConfig)."""

from __future__ import annotations

# first: on an unsupported transformers, a remote-code folder says what it needs (compat.py)
from ..compat import CACHE_NAME

import difflib
import inspect
import math
from typing import Any

from transformers import PretrainedConfig

# name -> field overrides on top of the TinyLMConfig defaults
PRESETS: dict[str, dict[str, Any]] = {
    # small enough to train for a few minutes on 2 CPU cores (~2.5M parameters with a 4k vocabulary)
    "cpu-quickstart": {
        "vocab_size": 4096,
        "hidden_size": 128,
        "intermediate_size": 352,
        "num_hidden_layers": 4,
        "num_attention_heads": 4,
        "max_position_embeddings": 256,
        "rope_theta": 10000.0,
    },
    # the Stanford CS336 assignment-1 TinyStories model
    "cs336-tinystories": {
        "vocab_size": 10000,
        "hidden_size": 512,
        "intermediate_size": 1344,
        "num_hidden_layers": 4,
        "num_attention_heads": 16,
        "max_position_embeddings": 256,
        "rope_theta": 10000.0,
    },
    # GPT-2 small's width/depth/context/vocabulary with a SwiGLU MLP of ~8/3 * d_model (~124M parameters)
    "gpt2-small": {
        "vocab_size": 50257,
        "hidden_size": 768,
        "intermediate_size": 2048,
        "num_hidden_layers": 12,
        "num_attention_heads": 12,
        "max_position_embeddings": 1024,
        "rope_theta": 10000.0,
        "tie_word_embeddings": True,
    },
}

_POSITIVE_INT_FIELDS = (
    "vocab_size",
    "hidden_size",
    "intermediate_size",
    "num_hidden_layers",
    "num_attention_heads",
    "max_position_embeddings",
)
_POSITIVE_FLOAT_FIELDS = ("rope_theta", "rms_norm_eps", "initializer_range")
_BOOL_FIELDS = ("tie_word_embeddings", "use_cache", "use_bidirectional_attention")
_TOKEN_ID_FIELDS = ("bos_token_id", "eos_token_id", "pad_token_id")
MAX_ROPE_TABLE_BYTES = 1 << 30
"""The most memory the rotary cos/sin tables (float32, one row per position) may take: 1 GiB holds 2M positions
of a 128-wide head. A larger max_position_embeddings is refused before the tables are allocated."""


class TinyLMConfig(PretrainedConfig):
    """Configuration of a TinyLM decoder (Llama-style: RMSNorm, RoPE, SwiGLU, causal multi-head attention).

    Field names are the Hugging Face ones (``hidden_size``, ``num_hidden_layers``, ...), so a TinyLM
    config maps one to one onto a ``LlamaConfig``. ``head_dim`` is derived (``hidden_size //
    num_attention_heads``). ``use_bidirectional_attention=True`` (Gemma's name) makes every layer attend
    both ways, padding still masked: the encoder of ``TinyLMForMaskedLM``, which sets it. Invalid values
    raise ``ValueError`` naming the field.

    >>> TinyLMConfig.from_preset("cs336-tinystories").head_dim
    32
    """

    model_type = "tinylm"
    keys_to_ignore_at_inference = [CACHE_NAME]

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
        eos_token_id: int | list[int] | None = None,
        pad_token_id: int | None = None,
        use_bidirectional_attention: bool = False,
        **kwargs: Any,
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
        self.use_bidirectional_attention = use_bidirectional_attention
        saved_head_dim = kwargs.pop("head_dim", None)
        _validate(self, tie_word_embeddings, bos_token_id, eos_token_id, pad_token_id)
        self.head_dim = hidden_size // num_attention_heads
        if saved_head_dim is not None and saved_head_dim != self.head_dim:
            raise ValueError(
                f"head_dim={saved_head_dim} disagrees with hidden_size // num_attention_heads = {self.head_dim}; "
                "TinyLM derives head_dim, drop it from the config"
            )
        super().__init__(
            bos_token_id=bos_token_id,
            eos_token_id=eos_token_id,
            pad_token_id=pad_token_id,
            tie_word_embeddings=tie_word_embeddings,
            **kwargs,
        )

    def save_pretrained(self, save_directory, *args: Any, **kwargs: Any) -> None:
        """Save as transformers does; a registered config's folder gets its code built from the import closure
        (``remote_code.py``) instead of transformers' flat copy of sibling files."""
        from ..remote_code import building_remote_code, remote_ref, write_remote_code

        with building_remote_code(type(self)) as build:
            if build:
                self.auto_map = {**(getattr(self, "auto_map", None) or {}), "AutoConfig": remote_ref(type(self))}
            super().save_pretrained(save_directory, *args, **kwargs)
        if build:
            write_remote_code(save_directory, [remote_ref(type(self))])

    @classmethod
    def from_preset(cls, name: str, **overrides: Any) -> TinyLMConfig:
        """Build the config of a named size from ``PRESETS`` (``"cpu-quickstart"``, ...), with overrides."""
        if name not in PRESETS:
            raise ValueError(f"unknown preset {name!r}; choose one of {sorted(PRESETS)}")
        return cls(**{**PRESETS[name], **overrides})


def _validate(
    config: TinyLMConfig,
    tie_word_embeddings: Any,
    bos_token_id: Any,
    eos_token_id: Any,
    pad_token_id: Any,
) -> None:
    """Raise ValueError naming the first field with a wrong type or an impossible value."""
    values = {name: getattr(config, name) for name in (*_POSITIVE_INT_FIELDS, *_POSITIVE_FLOAT_FIELDS)}
    values |= {"tie_word_embeddings": tie_word_embeddings, "use_cache": config.use_cache,
               "use_bidirectional_attention": config.use_bidirectional_attention}
    values |= {"bos_token_id": bos_token_id, "eos_token_id": eos_token_id, "pad_token_id": pad_token_id}
    for name, value in values.items():
        check_field(name, value)
    for name in _TOKEN_ID_FIELDS:
        ids = values[name] if isinstance(values[name], (list, tuple)) else [values[name]]
        for value in ids:
            if value is not None and not 0 <= value < config.vocab_size:
                raise ValueError(f"{name}={value} is outside the vocabulary [0, {config.vocab_size})")
    if config.hidden_size % config.num_attention_heads != 0:
        raise ValueError(
            f"hidden_size={config.hidden_size} is not divisible by num_attention_heads={config.num_attention_heads}"
        )
    head_dim = config.hidden_size // config.num_attention_heads
    if head_dim % 2 != 0:
        raise ValueError(f"head_dim = hidden_size // num_attention_heads = {head_dim} must be even for rotary embeddings")
    check_position_tables(config.max_position_embeddings, head_dim)


def check_field(name: str, value: Any) -> None:
    """Raise ValueError if `value` has the wrong type, or an impossible value, for the TinyLMConfig field `name`."""
    if name in _POSITIVE_INT_FIELDS:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"{name} must be an int, got {type(value).__name__} ({value!r})")
        if value <= 0:
            raise ValueError(f"{name} must be positive, got {value}")
    elif name in _POSITIVE_FLOAT_FIELDS:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"{name} must be a number, got {type(value).__name__} ({value!r})")
        if not (math.isfinite(value) and value > 0):
            raise ValueError(f"{name} must be a finite positive number, got {value}")
    elif name in _BOOL_FIELDS:
        if not isinstance(value, bool):
            raise ValueError(f"{name} must be a bool (true or false), got {type(value).__name__} ({value!r})")
    elif name in _TOKEN_ID_FIELDS:
        ids = value if name == "eos_token_id" and isinstance(value, (list, tuple)) else [value]
        for token_id in ids:
            if token_id is not None and (isinstance(token_id, bool) or not isinstance(token_id, int)):
                raise ValueError(f"{name} must be an int or None, got {type(token_id).__name__} ({token_id!r})")


def check_position_tables(positions: int, head_dim: int, *, name: str = "max_position_embeddings") -> None:
    """Refuse a model whose rotary cos/sin tables would take more than MAX_ROPE_TABLE_BYTES (`name`: the setting
    that asks for `positions`)."""
    size = positions * head_dim * 4  # cos and sin: (positions, head_dim // 2) float32 each
    if size > MAX_ROPE_TABLE_BYTES:
        raise ValueError(
            f"{name}={positions:,} would allocate {size / (1 << 30):.1f} GiB of rotary position tables (at most "
            f"{MAX_ROPE_TABLE_BYTES / (1 << 30):.0f} GiB); lower {name} to the context the model is meant to read"
        )


def check_overrides(overrides: dict[str, Any], *, preset: str | None = None, context_length: int | None = None) -> None:
    """Check TinyLMConfig field overrides (`--model`) before anything is built: every key a TinyLMConfig field
    (an unknown one named, with the nearest field suggested), every value of its field's type, and position
    tables of a sane size (a training run's model has `context_length` positions unless the overrides say)."""
    fields = overrides_accepted()
    for name, value in overrides.items():
        if name not in fields:
            close = difflib.get_close_matches(str(name), fields, n=1)
            hint = f"did you mean {close[0]!r}?" if close else f"the fields are {', '.join(fields)}"
            raise ValueError(f"unknown TinyLMConfig field {name!r} in the model overrides; {hint}")
        check_field(name, value)
    if preset is not None and preset not in PRESETS:
        raise ValueError(f"unknown preset {preset!r}; choose one of {sorted(PRESETS)}")
    merged = {**_DEFAULTS, **PRESETS.get(preset or "", {}), **overrides}
    if merged["hidden_size"] % merged["num_attention_heads"]:
        return  # TinyLMConfig says so when the model is built
    head_dim = merged["hidden_size"] // merged["num_attention_heads"]
    if "max_position_embeddings" in overrides or context_length is None:
        check_position_tables(merged["max_position_embeddings"], head_dim)
    else:
        check_position_tables(context_length, head_dim, name="context_length")


def overrides_accepted() -> list[str]:
    """The TinyLMConfig fields a `--model` override may set (the named arguments of TinyLMConfig)."""
    return list(_DEFAULTS)


_DEFAULTS = {name: p.default for name, p in inspect.signature(TinyLMConfig.__init__).parameters.items()
             if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD and name != "self"}
