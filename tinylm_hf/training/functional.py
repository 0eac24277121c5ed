"""Loss and gradient clipping written by hand: ``cross_entropy`` and ``clip_grad_norm``.

``cross_entropy`` lives beside the model (``tinylm_hf/modeling/loss_tinylm.py``), whose ``labels=`` path
uses the same function; it is re-exported here for the training loop.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch

from ..modeling.loss_tinylm import REDUCTIONS, cross_entropy

__all__ = ["REDUCTIONS", "clip_grad_norm", "cross_entropy"]


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
