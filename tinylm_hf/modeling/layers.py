"""Hand-written Llama-style layers in plain torch: softmax, attention, RMSNorm, SwiGLU, RoPE, decoder block.

Nothing here knows about transformers; the HF classes in ``modeling_tinylm.py`` wrap these modules.
Attribute names follow Llama (``q_proj``, ``gate_proj``, ``input_layernorm``, ...) so that state dicts
load into ``transformers.LlamaForCausalLM`` unchanged.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

ATTN_IMPLEMENTATIONS = ("eager", "sdpa")
# an attention function as transformers' AttentionInterface holds them:
# fn(module, q, k, v, attention_mask, *, scaling, dropout, **kwargs) -> (out (batch, seq, heads, head_dim), weights)
AttentionFunction = Callable[..., tuple[torch.Tensor, torch.Tensor | None]]


def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Numerically stable softmax: subtracting the max keeps exp() from overflowing."""
    shifted = x - x.amax(dim=dim, keepdim=True)
    exp = torch.exp(shifted)
    return exp / exp.sum(dim=dim, keepdim=True)


def silu(x: torch.Tensor) -> torch.Tensor:
    """SiLU / swish: x * sigmoid(x)."""
    return x * torch.sigmoid(x)


def scaled_dot_product_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """Reference attention softmax(q k^T / sqrt(d)) v; ``mask`` is boolean, True = may attend.

    Shapes: q (..., q_len, d_k), k (..., kv_len, d_k), v (..., kv_len, d_v), mask broadcastable to
    (..., q_len, kv_len); any number of leading batch dims. A row with no True entry gives NaN (as in torch).
    """
    return attention_probs(q, k, mask) @ v


def attention_probs(q: torch.Tensor, k: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """The attention weights softmax(q k^T / sqrt(d)) of shape (..., q_len, kv_len); masked-out keys get 0."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (..., q_len, kv_len)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return softmax(scores, dim=-1)


def causal_mask(q_len: int, kv_len: int, device: torch.device | str | None = None) -> torch.Tensor:
    """Boolean (q_len, kv_len) mask where query i (the last q_len of kv_len positions) sees keys <= its position."""
    offset = kv_len - q_len
    return torch.ones(q_len, kv_len, dtype=torch.bool, device=device).tril(diagonal=offset)


class RMSNorm(nn.Module):
    """Root-mean-square norm with a learned gain: x / sqrt(mean(x^2) + eps) * weight."""

    def __init__(self, hidden_size: int, eps: float = 1e-5, device=None, dtype=None) -> None:
        super().__init__()
        # Llama's attribute name: a Hub kernel swapped in for forward reads it, and callers (transformers' test
        # suites among them) set it
        self.variance_epsilon = eps
        self.weight = nn.Parameter(torch.ones(hidden_size, device=device, dtype=dtype))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        input_dtype = x.dtype
        # computed in float32 even for bf16/fp16 inputs, then cast back (as Llama does)
        x = x.to(torch.float32)
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.variance_epsilon)
        return self.weight * x.to(input_dtype)

    def extra_repr(self) -> str:
        return f"{self.weight.shape[0]}, eps={self.variance_epsilon}"


class SwiGLU(nn.Module):
    """Gated MLP w2(silu(w1 x) * w3 x) without biases; w1/w3/w2 are named gate_proj/up_proj/down_proj."""

    def __init__(self, hidden_size: int, intermediate_size: int, device=None, dtype=None) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(hidden_size, intermediate_size, bias=False, device=device, dtype=dtype)
        self.up_proj = nn.Linear(hidden_size, intermediate_size, bias=False, device=device, dtype=dtype)
        self.down_proj = nn.Linear(intermediate_size, hidden_size, bias=False, device=device, dtype=dtype)
        self.down_proj.is_residual_projection = True

    @property
    def w1(self) -> nn.Linear:
        return self.gate_proj

    @property
    def w2(self) -> nn.Linear:
        return self.down_proj

    @property
    def w3(self) -> nn.Linear:
        return self.up_proj

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # F.silu is the fused kernel of silu() above (same values, less memory in backward)
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


def compute_rope_tables(
    head_dim: int, max_position_embeddings: int, theta: float, device=None
) -> tuple[torch.Tensor, torch.Tensor]:
    """cos/sin tables of shape (max_position_embeddings, head_dim // 2) in float32."""
    exponents = torch.arange(0, head_dim, 2, dtype=torch.int64, device=device).float() / head_dim
    inv_freq = 1.0 / (theta**exponents)  # (head_dim // 2,)
    positions = torch.arange(max_position_embeddings, dtype=torch.int64, device=device).float()
    freqs = torch.outer(positions, inv_freq)  # (max_pos, head_dim // 2)
    return freqs.cos(), freqs.sin()


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate x in the half-split ("rotate_half") layout: pairs are (x[i], x[i + d/2]).

    cos/sin hold one angle per pair, shape broadcastable to x[..., : d/2]. Equals Llama's
    ``x * cat(cos, cos) + rotate_half(x) * cat(sin, sin)`` without building the duplicated tables.
    """
    # learned angles: let autograd differentiate the formula; under torch.compile the formula is what
    # the compiler fuses into one kernel (the out= writes below would break its graph)
    if cos.requires_grad or sin.requires_grad or torch.compiler.is_compiling():
        x1, x2 = x.chunk(2, dim=-1)
        return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)
    return _HalfSplitRotation.apply(x, cos, sin)


def _rotate_half_split(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """``cat(x1 cos - x2 sin, x2 cos + x1 sin)`` written straight into one output: no chunk copies, no cat."""
    x1, x2 = x.chunk(2, dim=-1)
    half = torch.broadcast_shapes(x1.shape, cos.shape, sin.shape)
    out = x.new_empty(half[:-1] + (2 * half[-1],), dtype=torch.result_type(x, cos))
    out1, out2 = out.chunk(2, dim=-1)
    torch.mul(x1, cos, out=out1)
    out1.addcmul_(x2, sin, value=-1.0)
    torch.mul(x2, cos, out=out2)
    out2.addcmul_(x1, sin)
    return out


class _HalfSplitRotation(torch.autograd.Function):
    """`apply_rotary` with a hand-written backward: a rotation's gradient is the rotation by minus the angle.

    Only cos/sin are kept for backward (not x), and backward is one more rotation (sin negated).
    """

    @staticmethod
    def forward(ctx, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(cos, sin)
        ctx.x_shape = x.shape
        return _rotate_half_split(x, cos, sin)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, None, None]:
        cos, sin = ctx.saved_tensors
        grad_x = _rotate_half_split(grad, cos, -sin)
        return grad_x.sum_to_size(ctx.x_shape), None, None


def apply_rotary_interleaved(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate x in the interleaved (RoFormer / original Meta) layout: pairs are (x[2i], x[2i + 1]).

    Same angles as `apply_rotary`; only the pairing of dimensions differs. The model uses the
    half-split layout (Llama's); this one is for weights or tests that expect adjacent pairs.
    """
    even, odd = x[..., 0::2], x[..., 1::2]
    return torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1).flatten(-2)


class RotaryEmbedding(nn.Module):
    """Rotary position embedding with cos/sin precomputed for every position up to max_position_embeddings."""

    def __init__(self, head_dim: int, max_position_embeddings: int, theta: float = 10000.0, device=None) -> None:
        super().__init__()
        if head_dim % 2 != 0:
            raise ValueError(f"head_dim must be even for rotary embeddings, got {head_dim}")
        self.head_dim = head_dim
        self.max_position_embeddings = max_position_embeddings
        self.theta = theta
        cos, sin = compute_rope_tables(head_dim, max_position_embeddings, theta, device=device)
        # non-persistent: recomputed, never saved (from_pretrained rebuilds them in _init_weights)
        self.register_buffer("cos_cached", cos, persistent=False)
        self.register_buffer("sin_cached", sin, persistent=False)

    def forward(
        self, position_ids: torch.Tensor, dtype: torch.dtype | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """cos, sin of shape position_ids.shape + (head_dim // 2,), cast to ``dtype`` when given."""
        cos, sin = self.cos_cached[position_ids], self.sin_cached[position_ids]
        if dtype is not None:
            cos, sin = cos.to(dtype), sin.to(dtype)
        return cos, sin

    def rotate(self, x: torch.Tensor, position_ids: torch.Tensor, *, interleaved: bool = False) -> torch.Tensor:
        """Apply RoPE to x (..., seq, head_dim) at position_ids (..., seq) (broadcast over leading dims).

        interleaved=True pairs adjacent dimensions instead of the half-split layout the model uses.
        """
        cos, sin = self.forward(position_ids, dtype=x.dtype)
        return (apply_rotary_interleaved if interleaved else apply_rotary)(x, cos, sin)


class CausalSelfAttention(nn.Module):
    """Causal multi-head self-attention with bias-free q/k/v/o projections and optional RoPE and KV cache.

    ``is_causal`` (an attribute, as in transformers) set to False makes it bidirectional: with no mask,
    every query sees every key (the encoder of ``TinyLMForMaskedLM``). ``scaling`` and
    ``num_key_value_groups`` (1: every head has its own keys) are what an attention function called with
    this module reads, as in Llama.
    """

    def __init__(self, hidden_size: int, num_heads: int, *, layer_idx: int = 0, device=None, dtype=None) -> None:
        super().__init__()
        if hidden_size % num_heads != 0:
            raise ValueError(f"hidden_size={hidden_size} is not divisible by num_heads={num_heads}")
        self.num_heads = num_heads
        self.head_dim = hidden_size // num_heads
        self.scaling = self.head_dim**-0.5
        self.num_key_value_groups = 1
        self.layer_idx = layer_idx
        self.is_causal = True
        kw = {"bias": False, "device": device, "dtype": dtype}
        self.q_proj = nn.Linear(hidden_size, hidden_size, **kw)
        self.k_proj = nn.Linear(hidden_size, hidden_size, **kw)
        self.v_proj = nn.Linear(hidden_size, hidden_size, **kw)
        self.o_proj = nn.Linear(hidden_size, hidden_size, **kw)
        self.o_proj.is_residual_projection = True

    def forward(
        self,
        hidden_states: torch.Tensor,
        rope: tuple[torch.Tensor, torch.Tensor] | None = None,
        attention_mask: torch.Tensor | None = None,
        cache=None,
        attn_implementation: str | AttentionFunction = "sdpa",
        output_attentions: bool = False,
        **kwargs,
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """hidden_states (batch, seq, hidden) -> (batch, seq, hidden).

        Args:
            rope: (cos, sin) of shape (batch or 1, seq, head_dim // 2) from RotaryEmbedding, or None for no RoPE.
            attention_mask: boolean (batch or 1, 1, seq, kv_len), True = attend; None = plain causal
                (or no mask at all when ``is_causal`` is False). An attention function gets it as given.
            cache: a transformers Cache; ``update(k, v, layer_idx)`` returns all keys/values.
            attn_implementation: "sdpa" (torch's fused kernel), "eager" (our reference attention), or an
                attention function with transformers' signature ``fn(module, q, k, v, attention_mask, *,
                scaling, dropout, **kwargs) -> (out (batch, seq, heads, head_dim), weights)``.
            output_attentions: also return the attention weights (batch, heads, seq, kv_len), computed by the
                eager path whatever ``attn_implementation`` says (the fused kernel never materialises them).
            kwargs: passed on to the cache update and the attention function (a paged cache's indices).
        """
        batch, seq, _ = hidden_states.shape
        q, k, v = self.project(hidden_states, rope)  # each (batch, heads, seq, head_dim)
        if cache is not None:
            k, v = self.update_cache(cache, k, v, kwargs)  # (batch, heads, kv_len, head_dim)
        if output_attentions:
            if attention_mask is None and self.is_causal:
                attention_mask = causal_mask(q.shape[-2], k.shape[-2], q.device)
            probs = attention_probs(q, k, attention_mask)  # (batch, heads, seq, kv_len)
            out = self.o_proj((probs @ v).transpose(1, 2).reshape(batch, seq, -1))
            return out, probs
        if callable(attn_implementation):
            out, _ = attn_implementation(self, q, k, v, attention_mask, scaling=self.scaling, dropout=0.0, **kwargs)
            return self.o_proj(out.reshape(batch, seq, -1))  # out: (batch, seq, heads, head_dim)
        out = attend(q, k, v, attention_mask, attn_implementation, is_causal=self.is_causal)
        return self.o_proj(out.transpose(1, 2).reshape(batch, seq, -1))

    def project(
        self, hidden_states: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor] | None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Queries, keys (both rotated when ``rope`` is given) and values, each (batch, heads, seq, head_dim)."""
        batch, seq, _ = hidden_states.shape
        shape = (batch, seq, self.num_heads, self.head_dim)
        q = self.q_proj(hidden_states).view(shape)  # (batch, seq, heads, head_dim)
        k = self.k_proj(hidden_states).view(shape)
        if rope is not None:
            # rotating before the head transpose keeps q/k (and so the attention output) laid out as
            # (batch, seq, heads, head_dim): the reshape back to (batch, seq, hidden) is then free
            cos, sin = rope[0].unsqueeze(2), rope[1].unsqueeze(2)  # (batch, seq, 1, head_dim // 2)
            q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
        v = self.v_proj(hidden_states).view(shape)
        return q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)

    def update_cache(self, cache, k: torch.Tensor, v: torch.Tensor, kwargs: dict) -> tuple[torch.Tensor, torch.Tensor]:
        """Append this step's keys/values to ``cache`` and return all of them (batch, heads, kv_len, head_dim)."""
        return cache.update(k, v, self.layer_idx)


def attend(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None,
    attn_implementation: str,
    is_causal: bool = True,
) -> torch.Tensor:
    """Attention over (batch, heads, seq, head_dim); ``mask`` None means plain causal (no mask if not is_causal)."""
    q_len, kv_len = q.shape[-2], k.shape[-2]
    if mask is None and not is_causal:
        if attn_implementation not in ATTN_IMPLEMENTATIONS:
            raise ValueError(f"attn_implementation must be one of {ATTN_IMPLEMENTATIONS}, got {attn_implementation!r}")
        if attn_implementation == "sdpa":
            return F.scaled_dot_product_attention(q, k, v)
        return scaled_dot_product_attention(q, k, v)
    if attn_implementation == "sdpa":
        if mask is None and q_len == kv_len:
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)
        if mask is None and q_len == 1:
            return F.scaled_dot_product_attention(q, k, v)
        if mask is None:
            mask = causal_mask(q_len, kv_len, q.device)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    if attn_implementation == "eager":
        if mask is None:
            mask = causal_mask(q_len, kv_len, q.device)
        return scaled_dot_product_attention(q, k, v, mask)
    raise ValueError(f"attn_implementation must be one of {ATTN_IMPLEMENTATIONS}, got {attn_implementation!r}")


class DecoderBlock(nn.Module):
    """Pre-norm transformer block: x + attn(norm(x)), then x + mlp(norm(x)).

    Its parts are built from class attributes, so a subclass can swap one for a subclass of it (the
    transformers classes swap in versions that transformers' kernel mapping can replace).
    """

    norm_class: type[RMSNorm] = RMSNorm
    attention_class: type[CausalSelfAttention] = CausalSelfAttention
    mlp_class: type[SwiGLU] = SwiGLU

    def __init__(
        self,
        hidden_size: int,
        num_heads: int,
        intermediate_size: int,
        *,
        rms_norm_eps: float = 1e-5,
        layer_idx: int = 0,
        device=None,
        dtype=None,
    ) -> None:
        super().__init__()
        kw = {"device": device, "dtype": dtype}
        self.input_layernorm = self.norm_class(hidden_size, rms_norm_eps, **kw)
        self.self_attn = self.attention_class(hidden_size, num_heads, layer_idx=layer_idx, **kw)
        self.post_attention_layernorm = self.norm_class(hidden_size, rms_norm_eps, **kw)
        self.mlp = self.mlp_class(hidden_size, intermediate_size, **kw)

    def forward(
        self,
        hidden_states: torch.Tensor,
        rope: tuple[torch.Tensor, torch.Tensor] | None = None,
        attention_mask: torch.Tensor | None = None,
        cache=None,
        attn_implementation: str | AttentionFunction = "sdpa",
        output_attentions: bool = False,
        **kwargs,
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """(batch, seq, hidden) -> (batch, seq, hidden); arguments as in CausalSelfAttention.forward.

        With ``output_attentions=True`` returns (hidden_states, attention weights) instead.
        """
        attn_out = self.self_attn(
            self.input_layernorm(hidden_states),
            rope,
            attention_mask,
            cache,
            attn_implementation,
            output_attentions=output_attentions,
            **kwargs,
        )
        attn_out, probs = attn_out if output_attentions else (attn_out, None)
        hidden_states = hidden_states + attn_out
        hidden_states = hidden_states + self.mlp(self.post_attention_layernorm(hidden_states))
        return (hidden_states, probs) if output_attentions else hidden_states
