"""Training: our AdamW, schedule, clipping, loss, data, checkpoints and the loop."""

from __future__ import annotations

from .functional import clip_grad_norm, cross_entropy
from .optimizer import AdamW, param_groups_for_weight_decay
from .schedule import cosine_lr

__all__ = ["AdamW", "clip_grad_norm", "cosine_lr", "cross_entropy", "param_groups_for_weight_decay"]
