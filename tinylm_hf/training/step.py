"""One optimizer step, shared by the training loop, the quickstart's calibration and the benchmarks.

forward (our cross-entropy) -> backward, once per micro-batch (gradient accumulation) -> gradient
norm and clipping -> finiteness check -> our AdamW step. A non-finite loss or gradient norm raises
before the weights change, so the model and optimizer stay as they were after the last good step.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from ..modeling.loss_tinylm import IGNORE_INDEX
from .errors import NonFiniteLossError
from .functional import clip_grad_norm, cross_entropy

if TYPE_CHECKING:
    from .objectives.base import StepLoss


def compiled_cross_entropy() -> Callable[..., torch.Tensor]:
    """`cross_entropy` under `torch.compile`: the loss's passes over the logits fuse into a few kernels.

    What a compiled model needs beside it: a compiled model alone leaves the largest elementwise work
    of the step, the (tokens, vocab) loss, to eager kernels.
    """
    return torch.compile(cross_entropy)


def compile_for_training(model: torch.nn.Module) -> tuple[torch.nn.Module, Callable[..., torch.Tensor]]:
    """`model` under `torch.compile`, and the loss to compute beside it (`train_step`'s `loss_fn`).

    The weights stay the plain model's: checkpoints, evaluation and the gradient norm use that one.
    """
    return torch.compile(model), compiled_cross_entropy()


def model_logits(model: torch.nn.Module, batch: Sequence[torch.Tensor]) -> torch.Tensor:
    """The logits of a micro-batch `(input_ids, labels)`, or `(input_ids, labels, attention_mask)` of a padded one."""
    input_ids, _, *mask = batch
    if mask:
        return model(input_ids=input_ids, attention_mask=mask[0]).logits
    return model(input_ids=input_ids).logits


@dataclass
class StepResult:
    """What one optimizer step measured."""

    loss: float
    """Mean training loss over the step's micro-batches (and DDP ranks)."""
    grad_norm: float
    """Global gradient L2 norm before clipping."""


def train_step(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    micro_batches: Sequence[Sequence[torch.Tensor]],
    *,
    lr: float,
    grad_clip: float | None = None,
    autocast: contextlib.AbstractContextManager | None = None,
    no_sync: Callable[[], contextlib.AbstractContextManager] | None = None,
    all_reduce: Callable[[torch.Tensor], torch.Tensor] | None = None,
    parameters: Sequence[torch.nn.Parameter] | None = None,
    loss_fn: Callable[..., torch.Tensor] | None = None,
    overlap: Callable[[], object] | None = None,
    step_loss: StepLoss | None = None,
) -> StepResult:
    """Accumulate gradients over `micro_batches` of `(x, y)`, clip, check, and step at learning rate `lr` (times a
    group's ``lr_scale`` where it has one: the Muon part of `MuonWithAdamW`).

    The loss is the mean over every target of the step (targets of -100, the positions a masked-LM
    batch does not predict, are left out), so a micro-batch with few or no targets weighs that much.
    A padded micro-batch `(x, y, attention_mask)` passes its mask to the model.

    Args:
        no_sync: DDP's `model.no_sync`, entered for every micro-batch but the last.
        all_reduce: averages the loss over DDP ranks (identity for one process).
        parameters: the unwrapped model's parameters, for the gradient norm (default: `model`'s).
        loss_fn: `cross_entropy` (default), or `compiled_cross_entropy()` beside a compiled model.
        overlap: called once the step's work is queued on the device, before the step waits for its loss
            and gradient norm (the finiteness check): host work done there, such as drawing the next
            batch, overlaps the GPU's work instead of leaving the GPU idle between steps.
        step_loss: an objective's own loss (`objectives.StepLoss`, DPO's), in place of the cross-entropy on
            each batch's labels; the step's loss is then the mean over the units it counts (pairs).
    """
    for group in optimizer.param_groups:
        group["lr"] = lr * group.get("lr_scale", 1.0)  # Muon's matrices keep their own peak rate (build_optimizer)
    loss_fn = loss_fn or cross_entropy
    loss_sum = None
    if step_loss is not None:
        n_targets = sum(step_loss.count(batch) for batch in micro_batches).clamp(min=1)
    else:
        n_targets = sum((batch[1] != IGNORE_INDEX).sum() for batch in micro_batches).clamp(min=1)  # no device sync
    for i, batch in enumerate(micro_batches):
        sync = no_sync() if no_sync is not None and i < len(micro_batches) - 1 else contextlib.nullcontext()
        with sync:
            if step_loss is not None:
                loss = step_loss(model, batch, autocast or contextlib.nullcontext()) / n_targets
            else:
                with autocast or contextlib.nullcontext():
                    logits = model_logits(model, batch)
                loss = loss_fn(logits, batch[1], reduction="sum") / n_targets
            loss.backward()
        loss_sum = loss.detach() if loss_sum is None else loss_sum + loss.detach()
    if all_reduce is not None:
        loss_sum = all_reduce(loss_sum)
    params = list(parameters if parameters is not None else model.parameters())
    grad_norm_t = clip_grad_norm(params, grad_clip if grad_clip else math.inf)
    if overlap is not None:
        overlap()
    grad_norm, step_loss = float(grad_norm_t), float(loss_sum)  # the step's one wait for the device
    if not (math.isfinite(step_loss) and math.isfinite(grad_norm)):
        optimizer.zero_grad(set_to_none=True)
        raise NonFiniteLossError(f"loss {step_loss}, gradient norm {grad_norm}")
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return StepResult(step_loss, grad_norm)
