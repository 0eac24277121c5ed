"""The old name of `tinylm_hf.training.run.summary` (the run summary): importing it gives that module itself, so old
imports and monkeypatches keep working."""

import sys

from .run import summary as _moved

sys.modules[__name__] = _moved
