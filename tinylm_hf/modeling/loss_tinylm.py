"""The one hand-written cross-entropy of TinyLM, and the next-token and masked-token losses of ``labels=``.

Both the training loop (``tinylm_hf.training``) and ``TinyLMForCausalLM(labels=...)`` use ``cross_entropy``
from here. This file imports only torch; saved folders carry it flat beside ``modeling_tinylm.py``
(``remote_code.py``).
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
    vocab = logits.shape[-1]
    flat_logits, flat_targets, flat_keep = logits.reshape(-1, vocab), safe_targets.reshape(-1), keep.reshape(-1)
    if torch.compiler.is_compiling():  # the compiler fuses forward and backward of the plain formula itself
        losses = _row_losses(flat_logits, log_sum_exp(flat_logits), flat_targets, flat_keep)
    else:
        losses = _CrossEntropy.apply(flat_logits, flat_targets, flat_keep)
    losses = losses.view(targets.shape)
    if reduction == "none":
        return losses
    if reduction == "sum":
        return losses.sum()
    return losses.sum() / keep.sum()


LOG_SUM_EXP_BLOCK = 1 << 18  # logits per block of the forward pass (1 MiB of float32: stays in the L2 cache)


def log_sum_exp(logits: torch.Tensor) -> torch.Tensor:
    """``log(sum(exp(logits), -1))`` of (rows, vocab) logits, in blocks of rows.

    ``log(sum(exp(x))) = max(x) + log(sum(exp(x - max(x))))``: the shifted exponentials never overflow.
    On a CPU, working a cache-sized block of rows at a time keeps the (rows, vocab) temporary out of
    main memory; on a GPU, or under torch.compile (which fuses the passes), all rows go at once: each
    block would cost kernel launches. That path is differentiable (the max shift is a constant).
    """
    if logits.device.type != "cpu" or torch.compiler.is_compiling():
        row_max = logits.amax(dim=-1, keepdim=True).detach()  # a constant shift: no gradient through the max
        return (logits - row_max).exp().sum(dim=-1).log() + row_max.squeeze(-1)
    rows = max(1, LOG_SUM_EXP_BLOCK // max(logits.shape[-1], 1))
    out = logits.new_empty(logits.shape[0])
    for start in range(0, logits.shape[0], rows):
        block = logits[start : start + rows]
        row_max = block.amax(dim=-1, keepdim=True)  # (rows, 1)
        out[start : start + rows] = (block - row_max).exp_().sum(dim=-1).log_() + row_max.squeeze(-1)
    return out


def _row_losses(logits: torch.Tensor, lse: torch.Tensor, targets: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    """``lse - x[y]`` per row of (rows, vocab) logits given their log-sum-exp; 0 where `keep` is False."""
    target_logit = logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1)  # (rows,)
    return torch.where(keep, lse - target_logit, 0.0)


class _CrossEntropy(torch.autograd.Function):
    """Per-row loss ``log_sum_exp(x) - x[y]`` of (rows, vocab) logits with a hand-written backward.

    The gradient of a row's loss is ``softmax(x) - onehot(y)``: backward builds it in one buffer
    (``exp(x - lse)``, minus 1 at the target, times the incoming gradient), three passes over the
    logits, where autograd through the forward's max/exp/sum/log would make several temporaries.
    Only the logits (already alive) and one number per row are kept for backward.
    """

    @staticmethod
    def forward(ctx, logits: torch.Tensor, targets: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
        lse = log_sum_exp(logits)  # (rows,)
        ctx.save_for_backward(logits, lse, targets, keep)
        return _row_losses(logits, lse, targets, keep)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_losses: torch.Tensor) -> tuple[torch.Tensor, None, None]:
        logits, lse, targets, keep = ctx.saved_tensors
        grad = torch.sub(logits, lse.unsqueeze(-1)).exp_()  # softmax, (rows, vocab)
        grad.scatter_add_(-1, targets.unsqueeze(-1), torch.full_like(lse, -1.0).unsqueeze(-1))
        grad.mul_(torch.where(keep, grad_losses, 0.0).unsqueeze(-1))
        return grad, None, None


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
