"""The old name of `tinylm_hf.training.run.state` (the resumable state of a run): importing it gives that module itself, so old
imports and monkeypatches keep working."""

import sys

from .run import state as _moved

sys.modules[__name__] = _moved
