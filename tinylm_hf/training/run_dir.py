"""The old name of `tinylm_hf.training.run.folder` (the run folder): importing it gives that module itself, so old
imports and monkeypatches keep working."""

import sys

from .run import folder as _moved

sys.modules[__name__] = _moved
