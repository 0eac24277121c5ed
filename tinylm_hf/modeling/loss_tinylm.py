"""The one hand-written cross-entropy of TinyLM, and the next-token and masked-token losses of ``labels=``.

Both the training loop (``tinylm_hf.training``) and ``TinyLMForCausalLM(labels=...)`` use ``cross_entropy``
from here. This file imports only torch: transformers copies it flat next to ``modeling_tinylm.py`` for
``trust_remote_code``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

REDUCTIONS = ("mean", "sum", "none")
IGNORE_INDEX = -100  # the label transformers and torch skip in the loss (padding, prompt tokens)


def cross_entropy(
    logits: torch.Tensor,
    targets: torch.Tensor,
    ignore_index: int = IGNORE_INDEX,
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


def causal_lm_loss(
    logits: torch.Tensor,
    labels: torch.Tensor | None = None,
    *,
    shift_labels: torch.Tensor | None = None,
    num_items_in_batch: int | torch.Tensor | None = None,
    ignore_index: int = IGNORE_INDEX,
) -> torch.Tensor:
    """Next-token loss of ``logits`` (batch, seq, vocab): position t is scored against ``labels[:, t + 1]``.

    ``shift_labels`` (batch, seq) are targets already aligned with the logits (what ``Trainer`` passes
    under sequence parallelism, where the shift must happen before the sequence is split); when given,
    ``labels`` is not used. ``num_items_in_batch`` (the count of real targets over all gradient-accumulation
    micro-batches) turns the mean into ``sum / num_items_in_batch``, so accumulated losses average per token.
    """
    if shift_labels is None:
        if labels is None:
            raise ValueError("pass labels (the input ids, shifted here) or shift_labels (already shifted)")
        if labels.shape != logits.shape[:-1]:
            raise ValueError(
                f"labels have shape {tuple(labels.shape)}, expected {tuple(logits.shape[:-1])}; "
                "with logits_to_keep, pass shift_labels for the kept positions instead"
            )
        # shifting the labels (not the logits) avoids copying the largest tensor of the step
        shift_labels = F.pad(labels, (0, 1), value=ignore_index)[..., 1:]
    return masked_lm_loss(logits, shift_labels, num_items_in_batch=num_items_in_batch, ignore_index=ignore_index)


def masked_lm_loss(
    logits: torch.Tensor,
    labels: torch.Tensor,
    *,
    num_items_in_batch: int | torch.Tensor | None = None,
    ignore_index: int = IGNORE_INDEX,
) -> torch.Tensor:
    """Loss of ``logits`` (batch, seq, vocab) against ``labels`` (batch, seq) at the same positions, no shift.

    The masked-LM loss: labels hold the original token where a position was chosen for masking and
    ``ignore_index`` elsewhere. ``num_items_in_batch`` as in `causal_lm_loss`.
    """
    labels = labels.to(logits.device)
    if num_items_in_batch is None:
        return cross_entropy(logits, labels, ignore_index=ignore_index)
    total = cross_entropy(logits, labels, ignore_index=ignore_index, reduction="sum")
    if isinstance(num_items_in_batch, torch.Tensor):
        num_items_in_batch = num_items_in_batch.to(total.device)
    return total / num_items_in_batch
