"""Muon written by hand (momentum, Nesterov, Newton-Schulz orthogonalisation), and `MuonWithAdamW`: Muon for the
hidden matrices and AdamW for the rest, in one optimizer object.

`Muon` follows ``torch.optim.Muon`` operation by operation (momentum with ``lerp``, the quintic Newton-Schulz
iteration in bfloat16 with ``addmm``, torch's coefficients, step count and learning-rate adjustment), so the
two give the same weights, and the state dict has torch's layout (``momentum_buffer`` per parameter).

As in the GPT-2 speedrun records (modded-nanogpt) and nanochat, Muon only suits the 2-D weights inside the
blocks; embeddings, the output head and norm gains train with AdamW. `MuonWithAdamW` holds both kinds of
parameter group in one optimizer, so checkpoints, exact resume, DDP and the learning-rate schedule see a single
optimizer. Under DDP every rank orthogonalises the same averaged gradient, so the ranks stay identical.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from .optimizer import ParamsT, check_adamw_hyperparameters, closure_loss, step_adamw_group

# Keller Jordan's quintic Newton-Schulz coefficients and step count (torch.optim.Muon's defaults)
NS_COEFFICIENTS = (3.4445, -4.7750, 2.0315)
NS_STEPS = 5
EPS = 1e-7
ADJUST_LR_FNS = (None, "original", "match_rms_adamw")


def zeropower_via_newtonschulz(grad: torch.Tensor, ns_coefficients: tuple[float, float, float], ns_steps: int,
                               eps: float) -> torch.Tensor:
    """An approximately orthogonal matrix with the singular vectors of `grad` (U S' V^T, S' near 1), in bfloat16.

    The quintic iteration X <- a X + (b A + c A^2) X with A = X X^T, on the wide orientation of `grad` scaled to
    a Frobenius norm of at most 1 (so its spectral norm is at most 1), as torch runs it.
    """
    if ns_steps >= 100:
        raise ValueError(f"Muon: ns_steps must be < 100, got {ns_steps}")
    if grad.dim() != 2:
        raise ValueError(f"Muon: the update of a {grad.dim()}-D tensor cannot be orthogonalised; Muon takes 2-D weights")
    a, b, c = ns_coefficients
    x = grad.bfloat16()
    tall = grad.size(0) > grad.size(1)
    if tall:
        x = x.T
    x.div_(x.norm().clamp(min=eps))
    for _ in range(ns_steps):
        gram = x @ x.T  # (rows, rows)
        poly = torch.addmm(gram, gram, gram, beta=b, alpha=c)  # b A + c A^2
        x = torch.addmm(x, poly, x, beta=a)  # a X + (b A + c A^2) X
    return x.T if tall else x


def adjust_lr(lr: float, adjust_lr_fn: str | None, shape: torch.Size) -> float:
    """The rate a matrix of `shape` (rows, columns) is updated at: "original" (Keller Jordan's, the default)
    scales by sqrt(max(1, rows / columns)); "match_rms_adamw" (Moonshot's) by 0.2 sqrt(max(rows, columns))."""
    rows, columns = shape[:2]
    if adjust_lr_fn is None or adjust_lr_fn == "original":
        return lr * math.sqrt(max(1, rows / columns))
    if adjust_lr_fn == "match_rms_adamw":
        return lr * 0.2 * math.sqrt(max(rows, columns))
    return lr


def step_muon_group(state: dict[torch.Tensor, dict[str, Any]], group: dict[str, Any]) -> None:
    """One Muon update of every parameter of `group` that has a gradient, in torch's operation order.

    Per matrix W with gradient G: B <- B + (1 - mu)(G - B) (that is, mu B + (1 - mu) G); the update is
    G + mu (B - G) with Nesterov, else B; O = NS(update); W *= 1 - lr wd; W -= adjust_lr(lr) O.
    """
    lr, weight_decay, momentum = group["lr"], group["weight_decay"], group["momentum"]
    for p in group["params"]:
        if p.grad is None:
            continue
        grad = p.grad
        if grad.is_sparse:
            raise RuntimeError("Muon does not support sparse gradients")
        if grad.dim() != 2:
            raise ValueError(f"Muon: gradient of shape {tuple(grad.shape)} is not a 2-D matrix")
        param_state = state[p]
        if "momentum_buffer" not in param_state:
            param_state["momentum_buffer"] = torch.zeros_like(grad, memory_format=torch.preserve_format)
        buf = param_state["momentum_buffer"]
        buf.lerp_(grad, 1 - momentum)
        update = grad.lerp(buf, momentum) if group["nesterov"] else buf
        update = zeropower_via_newtonschulz(update, group["ns_coefficients"], group["ns_steps"], group["eps"])
        p.mul_(1 - lr * weight_decay)
        p.add_(update, alpha=-adjust_lr(lr, group["adjust_lr_fn"], p.shape))


def _check_muon_hyperparameters(group: dict[str, Any]) -> None:
    if isinstance(group["lr"], torch.Tensor):
        raise TypeError("Muon: lr must be a Python float, not a tensor")
    for name in ("lr", "momentum", "weight_decay"):
        if not group[name] >= 0.0:
            raise ValueError(f"Muon: invalid {name} {group[name]!r}: it must be >= 0")
    if group["adjust_lr_fn"] not in ADJUST_LR_FNS:
        raise ValueError(f"Muon: unknown adjust_lr_fn {group['adjust_lr_fn']!r}; use 'original' or 'match_rms_adamw'")
    if len(group["ns_coefficients"]) != 3:
        raise ValueError(f"Muon: ns_coefficients must be three numbers (a, b, c), got {group['ns_coefficients']!r}")
    for p in group["params"]:
        if p.dim() != 2:
            raise ValueError(f"Muon only takes 2-D weights, got a parameter of shape {tuple(p.shape)}: "
                             "train it with AdamW (MuonWithAdamW takes both)")


def muon_defaults(lr: float, weight_decay: float, momentum: float, nesterov: bool,
                  ns_coefficients: tuple[float, float, float], eps: float, ns_steps: int,
                  adjust_lr_fn: str | None) -> dict[str, Any]:
    """A Muon parameter group's hyper-parameters (torch.optim.Muon's keys)."""
    return {"lr": lr, "weight_decay": weight_decay, "momentum": momentum, "nesterov": nesterov,
            "ns_coefficients": tuple(ns_coefficients), "eps": eps, "ns_steps": ns_steps, "adjust_lr_fn": adjust_lr_fn}


class Muon(torch.optim.Optimizer):
    """Momentum orthogonalised by Newton-Schulz (Keller Jordan), for 2-D weights; ``torch.optim.Muon``'s
    keyword arguments and defaults, and its result.

    Parameters without a gradient are skipped. Every parameter must be a matrix (as in torch): train embeddings,
    heads, norms and biases with AdamW, or use `MuonWithAdamW` for both.
    """

    def __init__(
        self,
        params: ParamsT,
        lr: float = 1e-3,
        weight_decay: float = 0.1,
        momentum: float = 0.95,
        nesterov: bool = True,
        ns_coefficients: tuple[float, float, float] = NS_COEFFICIENTS,
        eps: float = EPS,
        ns_steps: int = NS_STEPS,
        adjust_lr_fn: str | None = None,
    ) -> None:
        defaults = muon_defaults(lr, weight_decay, momentum, nesterov, ns_coefficients, eps, ns_steps, adjust_lr_fn)
        super().__init__(params, defaults)

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """Add a group, checking its hyper-parameters and that every parameter is a matrix."""
        super().add_param_group(param_group)
        _check_muon_hyperparameters(self.param_groups[-1])

    @torch.no_grad()
    def step(self, closure: Callable[[], float] | None = None) -> float | None:  # type: ignore[override]
        """Do one update of every parameter that has a gradient; return the closure's loss."""
        loss = closure_loss(closure)
        for group in self.param_groups:
            step_muon_group(self.state, group)
        return loss


class MuonWithAdamW(torch.optim.Optimizer):
    """Muon for the groups marked ``use_muon=True``, our AdamW for the others: one optimizer, one state dict.

    Each group takes its kind's hyper-parameters (a group may override any): AdamW groups ``lr``, ``betas``,
    ``eps``, ``weight_decay``; Muon groups ``lr`` (``muon_lr``), ``momentum``, ``nesterov``,
    ``ns_coefficients``, ``ns_steps``, ``eps`` (``ns_eps``), ``adjust_lr_fn``, ``weight_decay``. Each kind's
    update is exactly that of `Muon` and `AdamW`. `param_groups_for_muon` makes the groups of a TinyLM.
    """

    def __init__(
        self,
        param_groups: list[dict[str, Any]],
        *,
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.01,
        muon_lr: float = 0.02,
        momentum: float = 0.95,
        nesterov: bool = True,
        ns_coefficients: tuple[float, float, float] = NS_COEFFICIENTS,
        ns_eps: float = EPS,
        ns_steps: int = NS_STEPS,
        adjust_lr_fn: str | None = None,
    ) -> None:
        self._kind_defaults = {
            True: muon_defaults(muon_lr, weight_decay, momentum, nesterov, ns_coefficients, ns_eps, ns_steps,
                                adjust_lr_fn),
            False: {"lr": lr, "betas": tuple(betas), "eps": eps, "weight_decay": weight_decay},
        }
        if not all(isinstance(group, dict) and "use_muon" in group for group in param_groups):
            raise ValueError("MuonWithAdamW takes parameter groups, each with use_muon=True (Muon) or False (AdamW): "
                             "see param_groups_for_muon")
        super().__init__(param_groups, {})

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """Add a group with its kind's defaults (``use_muon``), checking its hyper-parameters."""
        use_muon = bool(param_group.get("use_muon"))
        super().add_param_group({**self._kind_defaults[use_muon], **param_group, "use_muon": use_muon})
        group = self.param_groups[-1]
        if use_muon:
            _check_muon_hyperparameters(group)
        else:
            check_adamw_hyperparameters(group["lr"], group["betas"], group["eps"], group["weight_decay"])

    @torch.no_grad()
    def step(self, closure: Callable[[], float] | None = None) -> float | None:  # type: ignore[override]
        """Do one update of every parameter that has a gradient (each group by its kind); return the closure's loss."""
        loss = closure_loss(closure)
        for group in self.param_groups:
            if group["use_muon"]:
                step_muon_group(self.state, group)
            else:
                step_adamw_group(self.state, group)
        return loss


def param_groups_for_muon(model: nn.Module, weight_decay: float) -> list[dict[str, Any]]:
    """`MuonWithAdamW`'s groups for a TinyLM (any model whose blocks are in a `layers` list): the 2-D weights inside
    the blocks with Muon; embeddings and heads (decayed) and 1-D weights (norm gains, biases: not decayed) with AdamW.

    Tied weights appear once; frozen parameters and empty groups are left out.
    """
    if not weight_decay >= 0.0:
        raise ValueError(f"weight_decay must be >= 0, got {weight_decay!r}")
    hidden, other, flat = [], [], []
    for name, p in model.named_parameters():  # a tied weight is listed once
        if not p.requires_grad:
            continue
        if p.dim() < 2:
            flat.append(p)
        elif p.dim() == 2 and "layers" in name.split("."):
            hidden.append(p)
        else:
            other.append(p)
    groups = [
        {"params": hidden, "use_muon": True, "weight_decay": weight_decay},
        {"params": other, "use_muon": False, "weight_decay": weight_decay},
        {"params": flat, "use_muon": False, "weight_decay": 0.0},
    ]
    return [group for group in groups if group["params"]]
