"""One optimizer step, shared by the training loop, the quickstart's calibration and the benchmarks.

forward and loss (a step loss: our cross-entropy on the labels, `LabelCrossEntropy`, or an objective's own)
-> backward, once per micro-batch (gradient accumulation) -> gradient norm and clipping -> finiteness check
-> our AdamW step. A non-finite loss or gradient norm raises before the weights change, so the model and
optimizer stay as they were after the last good step.
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


def model_logits(model: torch.nn.Module, batch: Sequence[torch.Tensor]) -> torch.Tensor:
    """The logits of a micro-batch `(input_ids, labels)`, or `(input_ids, labels, attention_mask)` of a padded one."""
    input_ids, _, *mask = batch
    if mask:
        return model(input_ids=input_ids, attention_mask=mask[0]).logits
    return model(input_ids=input_ids).logits


class LabelCrossEntropy:
    """The step loss of every objective whose model's logits are scored against its batches' labels (causal and
    masked LM, SFT, classification; `objectives.StepLoss`): our cross-entropy summed over a micro-batch's targets,
    which are its labels but those of -100 (the positions a masked-LM batch does not predict)."""

    def __init__(self, loss_fn: Callable[..., torch.Tensor] | None = None) -> None:
        self.loss_fn = loss_fn  # None: our `cross_entropy`; `compiled_cross_entropy()` beside a compiled model

    def count(self, batch: Sequence[torch.Tensor]) -> torch.Tensor:
        return (batch[1] != IGNORE_INDEX).sum()  # a tensor: no device sync

    def __call__(self, model: torch.nn.Module, batch: Sequence[torch.Tensor],
                 autocast: contextlib.AbstractContextManager) -> torch.Tensor:
        with autocast:
            logits = model_logits(model, batch)
        return (self.loss_fn or cross_entropy)(logits, batch[1], reduction="sum")


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
    """Accumulate gradients over `micro_batches`, clip, check, and step at learning rate `lr` (times a group's
    ``lr_scale`` where it has one: the Muon part of `MuonWithAdamW`).

    The step's loss is `step_loss`'s, summed over every micro-batch and divided by the units it counts in all
    of them: by default (`LabelCrossEntropy`) the cross-entropy over every target of the step (targets of -100
    left out), so a micro-batch with few or no targets weighs that much. A padded micro-batch
    `(x, y, attention_mask)` passes its mask to the model.

    Args:
        no_sync: DDP's `model.no_sync`, entered for every micro-batch but the last.
        all_reduce: averages the loss over DDP ranks (identity for one process).
        parameters: the unwrapped model's parameters, for the gradient norm (default: `model`'s).
        loss_fn: the cross-entropy of the default step loss: `cross_entropy` (None, the default), or
            `compiled_cross_entropy()` beside a compiled model.
        overlap: called once the step's work is queued on the device, before the step waits for its loss
            and gradient norm (the finiteness check): host work done there, such as drawing the next
            batch, overlaps the GPU's work instead of leaving the GPU idle between steps.
        step_loss: the loss of each micro-batch (`objectives.StepLoss`: an objective's `step_loss()`); by default
            `LabelCrossEntropy(loss_fn)`, the cross-entropy on each batch's labels.
    """
    for group in optimizer.param_groups:
        group["lr"] = lr * group.get("lr_scale", 1.0)  # Muon's matrices keep their own peak rate (build_optimizer)
    if step_loss is None:
        step_loss = LabelCrossEntropy(loss_fn)
    loss_sum = None
    n_units = sum(step_loss.count(batch) for batch in micro_batches).clamp(min=1)  # no device sync
    for i, batch in enumerate(micro_batches):
        sync = no_sync() if no_sync is not None and i < len(micro_batches) - 1 else contextlib.nullcontext()
        with sync:
            loss = step_loss(model, batch, autocast or contextlib.nullcontext()) / n_units
            loss.backward()
        loss_sum = loss.detach() if loss_sum is None else loss_sum + loss.detach()
    if all_reduce is not None:
        loss_sum = all_reduce(loss_sum)
    params = list(parameters if parameters is not None else model.parameters())
    grad_norm_t = clip_grad_norm(params, grad_clip if grad_clip else math.inf)
    if overlap is not None:
        overlap()
    grad_norm, loss = float(grad_norm_t), float(loss_sum)  # the step's one wait for the device
    if not (math.isfinite(loss) and math.isfinite(grad_norm)):
        optimizer.zero_grad(set_to_none=True)
        raise NonFiniteLossError(f"loss {loss}, gradient norm {grad_norm}")
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return StepResult(loss, grad_norm)
