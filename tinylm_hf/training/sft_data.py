"""The old import path of `training/objectives/sft_data.py` (chat fine-tuning's conversations and rows), kept for
existing imports."""

from .objectives.sft_data import *  # noqa: F403
