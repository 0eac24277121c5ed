"""The old home of `tinylm_hf.training.run.folder`: this name is that module, so old imports keep working."""

import sys

from .run import folder as _moved

sys.modules[__name__] = _moved
