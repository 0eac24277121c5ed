"""The old import path of `training/objectives/mlm_data.py` (the masked LM's static masks), kept for existing
imports."""

from .objectives.mlm_data import *  # noqa: F403
