"""The old name of `tinylm_hf.training.objectives.classification_data` (text classification's labelled examples): importing it gives that module itself, so old
imports and monkeypatches keep working."""

import sys

from .objectives import classification_data as _moved

sys.modules[__name__] = _moved
