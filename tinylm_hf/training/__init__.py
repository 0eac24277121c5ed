"""Training: our AdamW and Muon, schedule, clipping, loss, batching, checkpoints, the step and the loop.

Names are imported on first use (`tinylm_hf.lazy_exports`): `TrainConfig` (training/config.py) loads without
torch, so the command line builds its flags from it at once.
"""

from __future__ import annotations

from ..lazy_exports import export_lazily

__all__ = export_lazily(__name__, {
    "..corpus": ("load_tokens", "prepare_dataset"),
    ".batches": ("get_batch", "iter_eval_batches"),
    ".run.checkpoint": ("load_checkpoint", "save_checkpoint"),
    ".config": ("TrainConfig",),
    ".errors": ("NonFiniteLossError",),
    ".functional": ("clip_grad_norm", "cross_entropy"),
    ".loop": ("train",),
    ".objectives.masking": ("MLMCollator",),
    ".muon": ("Muon", "MuonWithAdamW", "param_groups_for_muon"),
    ".optimizer": ("AdamW", "param_groups_for_weight_decay"),
    ".schedule": ("cosine_lr",),
    ".step": ("StepResult", "compiled_cross_entropy", "train_step"),
    ".run.summary": ("DataProvenance", "RunSummary"),
})
