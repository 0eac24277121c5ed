"""The old import path of `training/objectives/classification_data.py` (text classification's labelled examples),
kept for existing imports."""

from .objectives.classification_data import *  # noqa: F403
