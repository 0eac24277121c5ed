"""Training: our AdamW, schedule, clipping, loss, data, checkpoints and the loop."""

from __future__ import annotations

from .checkpoint import load_checkpoint, save_checkpoint
from .config import TrainConfig
from .data import get_batch, iter_eval_batches, load_tokens, prepare_dataset
from .functional import clip_grad_norm, cross_entropy
from .loop import train
from .optimizer import AdamW, param_groups_for_weight_decay
from .schedule import cosine_lr

__all__ = [
    "AdamW",
    "TrainConfig",
    "clip_grad_norm",
    "cosine_lr",
    "cross_entropy",
    "get_batch",
    "iter_eval_batches",
    "load_checkpoint",
    "load_tokens",
    "param_groups_for_weight_decay",
    "prepare_dataset",
    "save_checkpoint",
    "train",
]
