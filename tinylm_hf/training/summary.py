"""The old home of `tinylm_hf.training.run.summary`: this name is that module, so old imports keep working."""

import sys

from .run import summary as _moved

sys.modules[__name__] = _moved
