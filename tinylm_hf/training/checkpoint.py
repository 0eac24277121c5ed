"""The old name of `tinylm_hf.training.run.checkpoint` (the checkpoint format and its reader): importing it gives that module itself, so old
imports and monkeypatches keep working."""

import sys

from .run import checkpoint as _moved

sys.modules[__name__] = _moved
