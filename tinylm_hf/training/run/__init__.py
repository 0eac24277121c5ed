"""A training run on disk: its folder, its checkpoints (the format and the one reader), its state and its summary.

How a run is stored lives here and nowhere else: `folder` (the out-dir, its lock, run.json and what a run
writes there), `checkpoint` (checkpoint files, written atomically, and `read_checkpoint`, which returns the
typed `Checkpoint` every other module reads), `state` (`TrainState`, and `RunCheckpoints`, which saves and
resumes it exactly) and `summary` (`RunSummary`, the record publishing reads).

Names are imported on first use (`tinylm_hf.lazy_exports`): the run folder and the summary load without torch.
"""

from __future__ import annotations

from ...lazy_exports import export_lazily

__all__ = export_lazily(__name__, {
    ".checkpoint": ("Checkpoint", "CheckpointError", "find_latest_checkpoint", "list_checkpoints", "load_checkpoint",
                    "read_checkpoint", "save_checkpoint", "save_training_state"),
    ".folder": ("RunDirectory", "RunInUseError"),
    ".state": ("RunCheckpoints", "TrainState"),
    ".summary": ("ClassificationTask", "DataProvenance", "RunSummary"),
})
