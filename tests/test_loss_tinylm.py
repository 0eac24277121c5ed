"""cross_entropy against F.cross_entropy; causal_lm_loss (shift, shift_labels, num_items_in_batch) against torch."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from tinylm_hf.modeling import loss_tinylm
from tinylm_hf.modeling.loss_tinylm import causal_lm_loss, cross_entropy, log_sum_exp


def reference_ce(logits: torch.Tensor, targets: torch.Tensor, **kwargs) -> torch.Tensor:
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), **kwargs)
    return loss.reshape(targets.shape) if kwargs.get("reduction") == "none" else loss


@pytest.mark.parametrize(
    "shape",
    [
        pytest.param((8, 11), id="2d"),
        pytest.param((3, 5, 11), id="3d"),
        pytest.param((2, 2, 3, 11), id="4d"),
    ],
)
def test_cross_entropy_matches_torch(shape: tuple[int, ...]) -> None:
    torch.manual_seed(0)
    logits = torch.randn(shape)
    targets = torch.randint(0, shape[-1], shape[:-1])
    torch.testing.assert_close(cross_entropy(logits, targets), reference_ce(logits, targets))


@settings(max_examples=40, deadline=None)
@given(
    leading=st.lists(st.integers(1, 4), min_size=1, max_size=3),
    vocab=st.integers(1, 40),
    scale=st.sampled_from([1e-3, 1.0, 30.0, 1e4]),
    ignore_fraction=st.floats(0.0, 0.9),
    seed=st.integers(0, 2**16),
)
def test_cross_entropy_matches_torch_on_random_inputs(
    leading: list[int], vocab: int, scale: float, ignore_fraction: float, seed: int
) -> None:
    gen = torch.Generator().manual_seed(seed)
    logits = torch.randn(*leading, vocab, generator=gen, dtype=torch.float64) * scale
    targets = torch.randint(0, vocab, tuple(leading), generator=gen)
    targets[torch.rand(tuple(leading), generator=gen) < ignore_fraction] = -100
    targets.view(-1)[0] = 0  # at least one counted position, so the mean is defined
    torch.testing.assert_close(cross_entropy(logits, targets), reference_ce(logits, targets))


def test_cross_entropy_is_stable_for_huge_logits() -> None:
    torch.manual_seed(1)
    logits = torch.randn(4, 6, 50) * 1000
    targets = torch.randint(0, 50, (4, 6))
    loss = cross_entropy(logits, targets)
    assert torch.isfinite(loss)
    torch.testing.assert_close(loss, reference_ce(logits, targets))


def test_cross_entropy_ignores_ignore_index() -> None:
    torch.manual_seed(2)
    logits = torch.randn(3, 7, 13)
    targets = torch.randint(0, 13, (3, 7))
    targets[0, :3] = -100
    targets[2, 5] = -100
    torch.testing.assert_close(cross_entropy(logits, targets), reference_ce(logits, targets))
    targets[targets == -100] = 4
    targets[1, 1] = 4
    torch.testing.assert_close(
        cross_entropy(logits, targets, ignore_index=4),
        reference_ce(logits, targets, ignore_index=4),
    )


@pytest.mark.parametrize("reduction", ["sum", "none"])
def test_cross_entropy_other_reductions(reduction: str) -> None:
    torch.manual_seed(3)
    logits = torch.randn(2, 9, 10)
    targets = torch.randint(0, 10, (2, 9))
    targets[1, 2] = -100
    torch.testing.assert_close(
        cross_entropy(logits, targets, reduction=reduction),
        reference_ce(logits, targets, reduction=reduction),
    )


@pytest.mark.parametrize("scale", [1.0, 1000.0], ids=["normal", "huge"])
def test_cross_entropy_gradient_matches_torch(scale: float) -> None:
    torch.manual_seed(4)
    base = torch.randn(3, 4, 21, dtype=torch.float64) * scale
    targets = torch.randint(0, 21, (3, 4))
    targets[0, 0] = -100
    ours = base.clone().requires_grad_()
    theirs = base.clone().requires_grad_()
    cross_entropy(ours, targets).backward()
    reference_ce(theirs, targets).backward()
    torch.testing.assert_close(ours.grad, theirs.grad)


def test_cross_entropy_hand_written_backward_passes_gradcheck() -> None:
    torch.manual_seed(7)
    logits = torch.randn(5, 13, dtype=torch.float64, requires_grad=True)
    targets = torch.tensor([0, 12, -100, 3, 3])
    for reduction in ("mean", "sum", "none"):
        assert torch.autograd.gradcheck(lambda x: cross_entropy(x, targets, reduction=reduction), (logits,))


def test_log_sum_exp_matches_torch_across_blocks(monkeypatch) -> None:
    monkeypatch.setattr(loss_tinylm, "LOG_SUM_EXP_BLOCK", 3 * 17)  # 3 rows a block: 10 rows span 4 blocks
    logits = torch.randn(10, 17, generator=torch.Generator().manual_seed(8)) * 50
    torch.testing.assert_close(log_sum_exp(logits), torch.logsumexp(logits, dim=-1))


def test_cross_entropy_upcasts_bfloat16() -> None:
    torch.manual_seed(5)
    logits = torch.randn(6, 30).bfloat16()
    targets = torch.randint(0, 30, (6,))
    loss = cross_entropy(logits, targets)
    assert loss.dtype == torch.float32
    torch.testing.assert_close(loss, F.cross_entropy(logits.float(), targets))


def test_cross_entropy_all_ignored_is_nan_like_torch() -> None:
    logits = torch.randn(2, 5)
    targets = torch.full((2,), -100)
    assert torch.isnan(F.cross_entropy(logits, targets))
    assert torch.isnan(cross_entropy(logits, targets))


def test_cross_entropy_rejects_mismatched_shapes() -> None:
    with pytest.raises(ValueError, match="leading shape"):
        cross_entropy(torch.randn(4, 5, 10), torch.zeros(4, 6, dtype=torch.long))


def test_cross_entropy_rejects_float_targets() -> None:
    with pytest.raises(TypeError, match="integer"):
        cross_entropy(torch.randn(4, 10), torch.zeros(4))


def test_cross_entropy_rejects_unknown_reduction() -> None:
    with pytest.raises(ValueError, match="reduction"):
        cross_entropy(torch.randn(4, 10), torch.zeros(4, dtype=torch.long), reduction="avg")




# ---------------------------------------------------------------- causal_lm_loss


def reference_causal_lm_loss(logits: torch.Tensor, targets: torch.Tensor, **kwargs) -> torch.Tensor:
    """torch's CE of logits[:, t] against already aligned targets[:, t]."""
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), targets.reshape(-1), **kwargs)


def lm_batch(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    logits = torch.randn(2, 6, 13, generator=gen)
    labels = torch.randint(0, 13, (2, 6), generator=gen)
    labels[0, :2] = -100
    return logits, labels


def test_causal_lm_loss_scores_each_position_against_the_next_label() -> None:
    logits, labels = lm_batch()
    expected = reference_causal_lm_loss(logits[:, :-1], labels[:, 1:])
    torch.testing.assert_close(causal_lm_loss(logits, labels), expected)


def test_causal_lm_loss_uses_shift_labels_as_given_and_ignores_labels() -> None:
    logits, labels = lm_batch()
    shift_labels = torch.randint(0, 13, (2, 6), generator=torch.Generator().manual_seed(1))
    shift_labels[1, -1] = -100
    expected = reference_causal_lm_loss(logits, shift_labels)
    torch.testing.assert_close(causal_lm_loss(logits, labels, shift_labels=shift_labels), expected)
    torch.testing.assert_close(causal_lm_loss(logits, None, shift_labels=shift_labels), expected)


@pytest.mark.parametrize("count", [7, torch.tensor(7)], ids=["int", "tensor"])
def test_causal_lm_loss_divides_the_sum_by_num_items_in_batch(count) -> None:
    logits, labels = lm_batch()
    total = reference_causal_lm_loss(logits[:, :-1], labels[:, 1:], reduction="sum")
    torch.testing.assert_close(causal_lm_loss(logits, labels, num_items_in_batch=count), total / 7)


def test_causal_lm_loss_needs_labels_of_the_logits_shape() -> None:
    logits, labels = lm_batch()
    with pytest.raises(ValueError, match="shift_labels"):
        causal_lm_loss(logits)
    with pytest.raises(ValueError, match="logits_to_keep"):
        causal_lm_loss(logits[:, -2:], labels)
