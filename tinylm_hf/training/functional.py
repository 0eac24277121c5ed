"""Loss and gradient clipping written by hand: ``cross_entropy`` and ``clip_grad_norm``."""

from __future__ import annotations

from collections.abc import Iterable

import torch

REDUCTIONS = ("mean", "sum", "none")


def cross_entropy(
    logits: torch.Tensor,
    targets: torch.Tensor,
    ignore_index: int = -100,
    reduction: str = "mean",
) -> torch.Tensor:
    """Cross-entropy of ``logits`` (..., vocab) against integer ``targets`` (...).

    Uses ``log_softmax(x)[y] = x[y] - max(x) - log(sum(exp(x - max(x))))`` so that huge logits
    never overflow. Positions whose target is ``ignore_index`` contribute nothing; ``"mean"``
    averages over the other positions (NaN when there are none, as in torch). Half-precision
    logits are upcast, and the loss is returned in float32.
    """
    if reduction not in REDUCTIONS:
        raise ValueError(f"reduction must be one of {REDUCTIONS}, got {reduction!r}")
    if logits.dim() < 1 or logits.shape[:-1] != targets.shape:
        raise ValueError(
            f"logits must be (..., vocab) and targets (...) with the same leading shape; "
            f"got logits {tuple(logits.shape)} and targets {tuple(targets.shape)}"
        )
    if targets.dtype.is_floating_point or targets.dtype == torch.bool:
        raise TypeError(f"targets must be integer class ids, got dtype {targets.dtype}")
    if logits.dtype in (torch.float16, torch.bfloat16):
        logits = logits.float()
    keep = targets != ignore_index
    safe_targets = torch.where(keep, targets, 0).long()
    # the max is a constant shift of each row: it cancels in the loss, so no gradient through it
    row_max = logits.amax(dim=-1, keepdim=True).detach()  # (..., 1)
    shifted = logits - row_max  # (..., vocab), every entry <= 0
    log_sum_exp = shifted.exp().sum(dim=-1).log()  # (...)
    target_logit = shifted.gather(-1, safe_targets.unsqueeze(-1)).squeeze(-1)  # (...)
    losses = torch.where(keep, log_sum_exp - target_logit, 0.0)
    if reduction == "none":
        return losses
    if reduction == "sum":
        return losses.sum()
    return losses.sum() / keep.sum()


def clip_grad_norm(
    parameters: Iterable[torch.Tensor] | torch.Tensor, max_l2_norm: float, eps: float = 1e-6
) -> torch.Tensor:
    """Scale all gradients together so that their global L2 norm is at most ``max_l2_norm``.

    The norm is taken over every gradient as one vector (parameters whose ``grad`` is None are
    skipped). When it exceeds ``max_l2_norm``, each gradient is multiplied in place by
    ``max_l2_norm / (norm + eps)``. Returns the norm before clipping (a float32 scalar tensor).
    The scale is applied branch-free (a factor clamped to 1), so a GPU never waits on the norm.
    """
    if not max_l2_norm >= 0.0:
        raise ValueError(f"max_l2_norm must be >= 0, got {max_l2_norm!r}")
    if isinstance(parameters, torch.Tensor):
        parameters = [parameters]
    grads = [p.grad for p in parameters if p.grad is not None]
    if not grads:
        return torch.tensor(0.0)
    device = grads[0].device
    by_kind: dict[tuple[torch.device, torch.dtype], list[torch.Tensor]] = {}
    for g in grads:
        by_kind.setdefault((g.device, g.dtype), []).append(g)
    part_norms = [n.float() for part in by_kind.values() for n in torch._foreach_norm(part, 2.0)]
    total_norm = torch.linalg.vector_norm(torch.stack([n.to(device) for n in part_norms]), 2.0)
    scale = torch.clamp(max_l2_norm / (total_norm + eps), max=1.0)
    for (part_device, _), part in by_kind.items():
        torch._foreach_mul_(part, scale.to(part_device))
    return total_norm
