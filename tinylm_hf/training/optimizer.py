"""AdamW written by hand: bias-corrected moments, decoupled weight decay, a multi-tensor step.

The update follows the foreach path of ``torch.optim.AdamW`` operation by operation (same order,
so bitwise the same result; within float32 round-off of its other paths), and the state dict has
the same layout (``step``, ``exp_avg``, ``exp_avg_sq`` per parameter), so either optimizer can load
the other's state.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import torch
from torch import nn

# elements per block of the CPU update: p, g, m, v and the denominator (~5 MB) stay in cache
CPU_BLOCK_NUMEL = 1 << 18

ParamsT = Iterable[torch.Tensor] | Iterable[dict[str, Any]]


class AdamW(torch.optim.Optimizer):
    """Adam with decoupled weight decay (Loshchilov & Hutter) and a multi-tensor step.

    Per parameter ``p`` with gradient ``g`` at step ``t``:
    ``p *= 1 - lr * wd``; ``m = b1 m + (1 - b1) g``; ``v = b2 v + (1 - b2) g^2``;
    ``p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)``.

    Each group's tensors are updated with ``torch._foreach_*`` ops, per device and dtype; on a
    CPU in cache-sized blocks (about 2x faster than ``torch.optim.AdamW(foreach=True)`` there,
    bitwise the same result). Parameters without a gradient are skipped (their step count does
    not advance). ``amsgrad`` and ``maximize`` exist only to reject ``True`` with a clear message.
    """

    def __init__(
        self,
        params: ParamsT,
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.01,
        *,
        amsgrad: bool = False,
        maximize: bool = False,
    ) -> None:
        check_adamw_hyperparameters(lr, betas, eps, weight_decay)
        if amsgrad:
            raise ValueError("AdamW: amsgrad=True is not supported; use torch.optim.AdamW for it")
        if maximize:
            raise ValueError("AdamW: maximize=True is not supported; negate the loss instead")
        defaults = {"lr": lr, "betas": tuple(betas), "eps": eps, "weight_decay": weight_decay}
        super().__init__(params, defaults)

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """Add a group, checking its own hyper-parameters (a group may override any default)."""
        super().add_param_group(param_group)
        group = self.param_groups[-1]
        check_adamw_hyperparameters(group["lr"], group["betas"], group["eps"], group["weight_decay"])

    @torch.no_grad()
    def step(  # type: ignore[override]
        self, closure: Callable[[], float] | None = None
    ) -> float | None:
        """Do one update of every parameter that has a gradient; return the closure's loss."""
        loss = closure_loss(closure)
        for group in self.param_groups:
            step_adamw_group(self.state, group)
        return loss


def closure_loss(closure: Callable[[], float] | None) -> float | None:
    """The loss of an optimizer step's `closure` (re-evaluated with gradients on, as torch's optimizers do)."""
    if closure is None:
        return None
    with torch.enable_grad():
        return closure()


def step_adamw_group(state: dict[torch.Tensor, dict[str, Any]], group: dict[str, Any]) -> None:
    """One AdamW update of every parameter of `group` that has a gradient (`state`: the optimizer's per-parameter
    state, created on first use); `MuonWithAdamW` runs its AdamW groups through it too."""
    tensors = _collect_group(state, group)
    for params, grads, exp_avgs, exp_avg_sqs, steps in _by_device_and_dtype(*tensors):
        _update(params, grads, exp_avgs, exp_avg_sqs, steps, group)


def _collect_group(
    optimizer_state: dict[torch.Tensor, dict[str, Any]], group: dict[str, Any]
) -> tuple[list[torch.Tensor], ...]:
    """Params with a gradient and their state, lazily creating the state on first use."""
    params, grads, exp_avgs, exp_avg_sqs, steps = [], [], [], [], []
    for p in group["params"]:
        if p.grad is None:
            continue
        if p.grad.is_sparse:
            raise RuntimeError("AdamW does not support sparse gradients")
        state = optimizer_state[p]
        if len(state) == 0:
            # step lives on the CPU as in torch, so reading it never syncs a GPU
            state["step"] = torch.tensor(0.0, dtype=torch.float32)
            state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
            state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
        params.append(p)
        grads.append(p.grad)
        exp_avgs.append(state["exp_avg"])
        exp_avg_sqs.append(state["exp_avg_sq"])
        steps.append(state["step"])
    return params, grads, exp_avgs, exp_avg_sqs, steps


def check_adamw_hyperparameters(
    lr: float, betas: tuple[float, float], eps: float, weight_decay: float
) -> None:
    """Refuse an AdamW group's hyper-parameters that are out of range, naming the value."""
    if isinstance(lr, torch.Tensor):
        raise TypeError("AdamW: lr must be a Python float, not a tensor")
    if not lr >= 0.0:
        raise ValueError(f"AdamW: invalid learning rate {lr!r}: it must be >= 0")
    if len(betas) != 2:
        raise ValueError(f"AdamW: betas must be a pair (beta1, beta2), got {betas!r}")
    for i, beta in enumerate(betas):
        if not 0.0 <= beta < 1.0:
            raise ValueError(f"AdamW: invalid beta{i + 1} {beta!r}: it must be in [0, 1)")
    if not eps >= 0.0:
        raise ValueError(f"AdamW: invalid eps {eps!r}: it must be >= 0")
    if not weight_decay >= 0.0:
        raise ValueError(f"AdamW: invalid weight_decay {weight_decay!r}: it must be >= 0")


def _by_device_and_dtype(
    *lists: list[torch.Tensor],
) -> list[tuple[list[torch.Tensor], ...]]:
    """Split parallel lists so that each part has one device and dtype (a foreach requirement)."""
    parts: dict[tuple[torch.device, torch.dtype], tuple[list[torch.Tensor], ...]] = {}
    params = lists[0]
    for i, p in enumerate(params):
        part = parts.setdefault((p.device, p.dtype), tuple([] for _ in lists))
        for column, values in zip(part, lists):
            column.append(values[i])
    return list(parts.values())


def _update(
    params: list[torch.Tensor],
    grads: list[torch.Tensor],
    exp_avgs: list[torch.Tensor],
    exp_avg_sqs: list[torch.Tensor],
    steps: list[torch.Tensor],
    group: dict[str, Any],
) -> None:
    """One AdamW update of same-device, same-dtype tensors, in torch's foreach operation order."""
    lr, eps, weight_decay = group["lr"], group["eps"], group["weight_decay"]
    beta1, beta2 = group["betas"]
    torch._foreach_add_(steps, torch.tensor(1.0), alpha=1.0)
    step_values = [step.item() for step in steps]
    step_sizes = [-lr / (1 - beta1**t) for t in step_values]
    bias_correction2_sqrt = [(1 - beta2**t) ** 0.5 for t in step_values]
    columns = (params, grads, exp_avgs, exp_avg_sqs, step_sizes, bias_correction2_sqrt)
    blocks = _cache_sized_blocks(*columns) if params[0].is_cpu else [columns]
    for p, g, m, v, step_size, bc2_sqrt in blocks:
        if weight_decay != 0:
            torch._foreach_mul_(p, 1 - lr * weight_decay)
        # m <- m + (1 - b1)(g - m) == b1 m + (1 - b1) g;  v <- b2 v + (1 - b2) g^2
        torch._foreach_lerp_(m, g, 1 - beta1)
        torch._foreach_mul_(v, beta2)
        torch._foreach_addcmul_(v, g, g, 1 - beta2)
        denom = torch._foreach_sqrt(v)
        torch._foreach_div_(denom, bc2_sqrt)
        torch._foreach_add_(denom, eps)
        torch._foreach_addcdiv_(p, m, denom, step_size)


def _cache_sized_blocks(*columns: list[Any]) -> list[tuple[list[Any], ...]]:
    """Regroup parallel lists into blocks of about ``CPU_BLOCK_NUMEL`` elements each.

    On a CPU each foreach op is a pass over memory; running all eight ops on one cache-sized
    block before moving on reads each element from RAM about once instead of eight times. The
    arithmetic per element is unchanged, so the result is bitwise the same. ``columns[0]`` holds
    the parameters; the others hold tensors shaped like them or per-tensor scalars.
    """
    blocks: list[tuple[list[Any], ...]] = []
    filled = 0
    for row in zip(*columns):
        for piece in _split_row(row):
            numel = piece[0].numel()
            if not blocks or (filled > 0 and filled + numel > CPU_BLOCK_NUMEL):
                blocks.append(tuple([] for _ in columns))
                filled = 0
            for column, x in zip(blocks[-1], piece):
                column.append(x)
            filled += numel
    return blocks


def _split_row(row: tuple[Any, ...]) -> list[tuple[Any, ...]]:
    """One parameter's tensors cut into flat views of ``CPU_BLOCK_NUMEL`` elements, if contiguous."""
    tensors = [x for x in row if isinstance(x, torch.Tensor)]
    numel = row[0].numel()
    if numel <= CPU_BLOCK_NUMEL or not all(t.is_contiguous() for t in tensors):
        return [row]
    flat = [x.view(-1) if isinstance(x, torch.Tensor) else x for x in row]
    return [
        tuple(x[i : i + CPU_BLOCK_NUMEL] if isinstance(x, torch.Tensor) else x for x in flat)
        for i in range(0, numel, CPU_BLOCK_NUMEL)
    ]


def param_groups_for_weight_decay(model: nn.Module, weight_decay: float) -> list[dict[str, Any]]:
    """Two optimizer groups: matrices (linear and embedding weights) decayed, the rest not.

    As in nanoGPT, every trainable parameter with two or more dimensions is decayed; 1-D ones
    (norm gains, biases) get ``weight_decay=0``. Tied weights appear once; frozen parameters and
    empty groups are left out.
    """
    if not weight_decay >= 0.0:
        raise ValueError(f"weight_decay must be >= 0, got {weight_decay!r}")
    trainable = [p for p in model.parameters() if p.requires_grad]
    decay = [p for p in trainable if p.dim() >= 2]
    no_decay = [p for p in trainable if p.dim() < 2]
    groups = [
        {"params": decay, "weight_decay": weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]
    return [group for group in groups if group["params"]]
