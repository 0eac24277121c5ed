"""The old home of `tinylm_hf.training.run.state`: this name is that module, so old imports keep working."""

import sys

from .run import state as _moved

sys.modules[__name__] = _moved
