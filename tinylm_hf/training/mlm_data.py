"""The old name of `tinylm_hf.training.objectives.mlm_data` (the masked LM's static masks): importing it gives that module itself, so old
imports and monkeypatches keep working."""

import sys

from .objectives import mlm_data as _moved

sys.modules[__name__] = _moved
