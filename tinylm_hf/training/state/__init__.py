"""The old name of `tinylm_hf.training.run.state`: importing it gives that module, so old imports keep working.

A package rather than state.py, so that git sees state.py renamed to run/state.py and carries edits made to it
on other branches into the moved file.
"""

import sys

from ..run import state as _moved

sys.modules[__name__] = _moved
