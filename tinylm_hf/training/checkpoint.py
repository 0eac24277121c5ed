"""The old home of `tinylm_hf.training.run.checkpoint`: this name is that module, so old imports keep working."""

import sys

from .run import checkpoint as _moved

sys.modules[__name__] = _moved
