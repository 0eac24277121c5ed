"""The old import path of `training/objectives/masking.py` (MLMCollator, the masked LM's collator), kept for imports."""

from .objectives.masking import *  # noqa: F403
