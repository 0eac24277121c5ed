"""clip_grad_norm against clip_grad_norm_; cross_entropy is re-exported from the model's loss module."""

from __future__ import annotations

import pytest
import torch

import tinylm_hf
from tinylm_hf import training
from tinylm_hf.modeling import loss_tinylm
from tinylm_hf.training import clip_grad_norm


def test_cross_entropy_is_the_models_loss_function() -> None:
    # one hand-written cross-entropy: the loop and the model's labels= path share it
    assert training.cross_entropy is loss_tinylm.cross_entropy
    assert tinylm_hf.cross_entropy is loss_tinylm.cross_entropy
    assert training.functional.cross_entropy is loss_tinylm.cross_entropy


def make_params_with_grads(scale: float, seed: int = 0) -> list[torch.nn.Parameter]:
    """Parameters of several shapes, one of them without a gradient."""
    gen = torch.Generator().manual_seed(seed)
    shapes = [(5, 7), (7,), (3, 2, 4), (6,)]
    params = [torch.nn.Parameter(torch.randn(shape, generator=gen)) for shape in shapes]
    for p in params[:-1]:
        p.grad = torch.randn(p.shape, generator=gen) * scale
    return params


@pytest.mark.parametrize("scale", [1.0, 100.0], ids=["small-norm", "large-norm"])
def test_clip_grad_norm_matches_torch(scale: float) -> None:
    ours, theirs = make_params_with_grads(scale), make_params_with_grads(scale)
    our_norm = clip_grad_norm(iter(ours), max_l2_norm=3.0)
    their_norm = torch.nn.utils.clip_grad_norm_(theirs, max_norm=3.0)
    torch.testing.assert_close(our_norm, their_norm, atol=1e-6, rtol=0)
    assert ours[-1].grad is None and theirs[-1].grad is None
    for a, b in zip(ours[:-1], theirs[:-1]):
        torch.testing.assert_close(a.grad, b.grad, atol=1e-6, rtol=0)


def test_clip_grad_norm_below_threshold_changes_nothing() -> None:
    params = make_params_with_grads(0.01)
    before = [p.grad.clone() for p in params if p.grad is not None]
    norm = clip_grad_norm(params, max_l2_norm=10.0)
    assert norm.item() < 10.0
    assert all(torch.equal(p.grad, b) for p, b in zip(params, before))


def test_clip_grad_norm_result_has_the_max_norm() -> None:
    params = make_params_with_grads(50.0)
    clip_grad_norm(params, max_l2_norm=1.0)
    grads = [p.grad.flatten() for p in params if p.grad is not None]
    total = torch.linalg.vector_norm(torch.cat(grads))
    assert total.item() == pytest.approx(1.0, abs=1e-5)


def test_clip_grad_norm_without_grads_returns_zero() -> None:
    params = [torch.nn.Parameter(torch.ones(3))]
    assert clip_grad_norm(params, max_l2_norm=1.0).item() == 0.0
    assert params[0].grad is None


def test_clip_grad_norm_rejects_negative_max() -> None:
    with pytest.raises(ValueError, match="max_l2_norm"):
        clip_grad_norm(make_params_with_grads(1.0), max_l2_norm=-1.0)
