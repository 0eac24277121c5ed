"""Hand-written layers against torch references and hand-checkable cases."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from tinylm_hf.modeling.layers import (
    CausalSelfAttention,
    DecoderBlock,
    RMSNorm,
    RotaryEmbedding,
    SwiGLU,
    apply_rotary,
    apply_rotary_interleaved,
    causal_mask,
    scaled_dot_product_attention,
    silu,
    softmax,
)


@pytest.mark.parametrize("dim", [0, 1, -1], ids=["dim0", "dim1", "dim-1"])
def test_softmax_matches_torch(dim: int) -> None:
    x = torch.randn(4, 5, 6, generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(softmax(x, dim=dim), torch.softmax(x, dim=dim))


def test_softmax_is_stable_for_large_inputs() -> None:
    x = torch.tensor([[1000.0, 1001.0, 1002.0], [-1000.0, 0.0, 1000.0]])
    out = softmax(x, dim=-1)
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out, torch.softmax(x, dim=-1))


def test_silu_matches_torch() -> None:
    x = torch.linspace(-8, 8, 101)
    torch.testing.assert_close(silu(x), F.silu(x))


@pytest.mark.parametrize("leading", [(), (3,), (2, 3), (2, 2, 3)], ids=["none", "one", "two", "three"])
def test_sdpa_matches_torch_with_boolean_mask(leading: tuple[int, ...]) -> None:
    g = torch.Generator().manual_seed(1)
    q, k = torch.randn(*leading, 5, 8, generator=g), torch.randn(*leading, 7, 8, generator=g)
    v = torch.randn(*leading, 7, 4, generator=g)
    mask = torch.rand(*leading, 5, 7, generator=g) > 0.4
    mask[..., 0] = True  # every query attends to at least one key
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    torch.testing.assert_close(scaled_dot_product_attention(q, k, v, mask), expected)


def test_sdpa_without_mask_matches_torch() -> None:
    g = torch.Generator().manual_seed(2)
    q, k, v = (torch.randn(2, 4, 6, 8, generator=g) for _ in range(3))
    torch.testing.assert_close(scaled_dot_product_attention(q, k, v), F.scaled_dot_product_attention(q, k, v))


def test_causal_mask_offsets_queries_to_the_end() -> None:
    expected = torch.tensor([[True, True, True, False], [True, True, True, True]])
    assert torch.equal(causal_mask(2, 4), expected)


def test_rmsnorm_hand_computed() -> None:
    norm = RMSNorm(2, eps=0.0)
    with torch.no_grad():
        norm.weight.copy_(torch.tensor([1.0, 2.0]))
    rms = math.sqrt((3.0**2 + 4.0**2) / 2)
    torch.testing.assert_close(norm(torch.tensor([[3.0, 4.0]])), torch.tensor([[3.0 / rms, 2 * 4.0 / rms]]))


def test_rmsnorm_variance_epsilon_is_a_settable_attribute_as_in_llama() -> None:
    norm = RMSNorm(2, eps=0.0)
    norm.variance_epsilon = 7.0  # Llama's name, set by transformers' test suites and read by Hub kernels
    rms = math.sqrt((3.0**2 + 4.0**2) / 2 + 7.0)
    torch.testing.assert_close(norm(torch.tensor([[3.0, 4.0]])), torch.tensor([[3.0 / rms, 4.0 / rms]]))


def test_rmsnorm_computes_in_float32_and_casts_back() -> None:
    x = torch.randn(3, 16, generator=torch.Generator().manual_seed(3)).to(torch.bfloat16)
    norm = RMSNorm(16).to(torch.bfloat16)
    out = norm(x)
    assert out.dtype == torch.bfloat16
    xf = x.float()
    expected = (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-5)).to(torch.bfloat16)
    assert torch.equal(out, expected)


def test_swiglu_is_w2_of_silu_w1_times_w3() -> None:
    torch.manual_seed(4)
    mlp = SwiGLU(6, 10)
    x = torch.randn(2, 3, 6)
    w1, w2, w3 = mlp.w1.weight, mlp.w2.weight, mlp.w3.weight
    expected = (silu(x @ w1.T) * (x @ w3.T)) @ w2.T
    torch.testing.assert_close(mlp(x), expected)
    assert mlp.w1 is mlp.gate_proj and mlp.w2 is mlp.down_proj and mlp.w3 is mlp.up_proj


def test_rope_rotates_each_half_split_pair_by_position_times_frequency() -> None:
    rope = RotaryEmbedding(head_dim=4, max_position_embeddings=8, theta=100.0)
    x = torch.tensor([1.0, 0.0, 0.0, 1.0])  # pair 0 = (x[0], x[2]), pair 1 = (x[1], x[3])
    position = 3
    out = rope.rotate(x.view(1, 1, 4), torch.tensor([[position]]))[0, 0]
    a0, a1 = position * 1.0, position / 100.0 ** (2 / 4)
    # (1, 0) rotated by a0 -> (cos a0, sin a0); (0, 1) rotated by a1 -> (-sin a1, cos a1)
    expected = torch.tensor([math.cos(a0), -math.sin(a1), math.sin(a0), math.cos(a1)])
    torch.testing.assert_close(out, expected)


def test_rope_position_zero_is_identity() -> None:
    rope = RotaryEmbedding(head_dim=8, max_position_embeddings=4)
    x = torch.randn(2, 1, 8)
    torch.testing.assert_close(rope.rotate(x, torch.zeros(2, 1, dtype=torch.long)), x)


def test_rope_scores_depend_only_on_relative_position() -> None:
    rope = RotaryEmbedding(head_dim=16, max_position_embeddings=64, theta=10000.0)
    g = torch.Generator().manual_seed(5)
    q, k = torch.randn(1, 1, 16, generator=g), torch.randn(1, 1, 16, generator=g)

    def score(m: int, n: int) -> torch.Tensor:
        return (rope.rotate(q, torch.tensor([[m]])) * rope.rotate(k, torch.tensor([[n]]))).sum()

    torch.testing.assert_close(score(7, 3), score(40, 36))


def test_rope_matches_llama_rotate_half() -> None:
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    rope = RotaryEmbedding(head_dim=8, max_position_embeddings=32, theta=10000.0)
    g = torch.Generator().manual_seed(6)
    q, k = torch.randn(2, 3, 5, 8, generator=g), torch.randn(2, 3, 5, 8, generator=g)
    position_ids = torch.tensor([[0, 1, 2, 3, 4], [9, 10, 11, 12, 13]])
    cos, sin = rope(position_ids)
    cos_full, sin_full = torch.cat((cos, cos), -1), torch.cat((sin, sin), -1)
    q_ref, k_ref = apply_rotary_pos_emb(q, k, cos_full, sin_full)
    torch.testing.assert_close(apply_rotary(q, cos.unsqueeze(1), sin.unsqueeze(1)), q_ref)
    torch.testing.assert_close(apply_rotary(k, cos.unsqueeze(1), sin.unsqueeze(1)), k_ref)


def test_attention_eager_and_sdpa_agree() -> None:
    torch.manual_seed(7)
    attn = CausalSelfAttention(32, 4)
    x = torch.randn(2, 9, 32)
    rope = RotaryEmbedding(8, 16)(torch.arange(9).unsqueeze(0))
    torch.testing.assert_close(attn(x, rope, attn_implementation="eager"), attn(x, rope, attn_implementation="sdpa"))


def test_attention_is_causal() -> None:
    torch.manual_seed(8)
    attn = CausalSelfAttention(16, 2)
    x = torch.randn(1, 6, 16)
    changed = x.clone()
    changed[:, 4:] = torch.randn(1, 2, 16)
    torch.testing.assert_close(attn(x)[:, :4], attn(changed)[:, :4])
    assert not torch.allclose(attn(x)[:, 4:], attn(changed)[:, 4:])


def test_attention_rejects_unknown_implementation() -> None:
    attn = CausalSelfAttention(16, 2)
    with pytest.raises(ValueError, match="attn_implementation"):
        attn(torch.randn(1, 3, 16), attn_implementation="flash")


def test_decoder_block_is_pre_norm_residual() -> None:
    torch.manual_seed(9)
    block = DecoderBlock(16, 2, 24)
    x = torch.randn(2, 5, 16)
    h = x + block.self_attn(block.input_layernorm(x))
    expected = h + block.mlp(block.post_attention_layernorm(h))
    torch.testing.assert_close(block(x), expected)


def test_interleaved_rope_is_half_split_rope_on_permuted_dimensions():
    torch.manual_seed(0)
    head_dim, seq = 8, 5
    rope = RotaryEmbedding(head_dim, 16, theta=10000.0)
    x = torch.randn(2, seq, head_dim)
    positions = torch.tensor([3, 0, 7, 1, 15])
    # interleaved pair (2i, 2i+1) is half-split pair (i, i + d/2) after this permutation
    perm = torch.cat((torch.arange(0, head_dim, 2), torch.arange(1, head_dim, 2)))
    expected = rope.rotate(x[..., perm], positions)
    got = rope.rotate(x, positions, interleaved=True)[..., perm]
    torch.testing.assert_close(got, expected)


def test_interleaved_rope_rotates_adjacent_pairs_by_hand():
    rope = RotaryEmbedding(2, 4, theta=10000.0)
    x = torch.tensor([[1.0, 0.0]])
    got = rope.rotate(x, torch.tensor([1]), interleaved=True)
    torch.testing.assert_close(got, torch.tensor([[math.cos(1.0), math.sin(1.0)]]))


@pytest.mark.parametrize(
    ("x_shape", "angle_shape"),
    [pytest.param((2, 5, 3, 8), (1, 5, 1, 4), id="model-layout"), pytest.param((5, 8), (2, 5, 4), id="broadcast-x")],
)
def test_rope_hand_written_backward_matches_autograd_of_the_formula(x_shape, angle_shape) -> None:
    g = torch.Generator().manual_seed(9)
    x = torch.randn(x_shape, dtype=torch.float64, generator=g, requires_grad=True)
    angles = torch.randn(angle_shape, dtype=torch.float64, generator=g)
    cos, sin = angles.cos(), angles.sin()
    x1, x2 = x.chunk(2, dim=-1)
    expected = torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)
    out = apply_rotary(x, cos, sin)
    torch.testing.assert_close(out, expected)
    grad_out = torch.randn(out.shape, dtype=torch.float64, generator=g)
    torch.testing.assert_close(torch.autograd.grad(out, x, grad_out)[0], torch.autograd.grad(expected, x, grad_out)[0])


def test_rope_with_learned_angles_gives_their_gradient() -> None:
    x = torch.randn(3, 8, dtype=torch.float64)
    angles = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda a: apply_rotary(x, a.cos(), a.sin()), (angles,))
