"""Training: our AdamW, schedule, clipping, loss, batching, checkpoints, the step and the loop."""

from __future__ import annotations

from ..corpus import load_tokens, prepare_dataset
from .batches import get_batch, iter_eval_batches
from .checkpoint import load_checkpoint, save_checkpoint
from .config import TrainConfig
from .functional import clip_grad_norm, cross_entropy
from .loop import train
from .masking import MLMCollator
from .optimizer import AdamW, param_groups_for_weight_decay
from .schedule import cosine_lr
from .step import NonFiniteLossError, StepResult, compiled_cross_entropy, train_step
from .summary import DataProvenance, RunSummary

__all__ = [
    "AdamW",
    "DataProvenance",
    "MLMCollator",
    "NonFiniteLossError",
    "RunSummary",
    "StepResult",
    "TrainConfig",
    "clip_grad_norm",
    "compiled_cross_entropy",
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
    "train_step",
]
