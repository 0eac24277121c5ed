"""The old name of `tinylm_hf.training.run.summary`: importing it gives that module, so old imports keep working.

A package rather than summary.py, so that git sees summary.py renamed to run/summary.py and carries edits made to it
on other branches into the moved file.
"""

import sys

from ..run import summary as _moved

sys.modules[__name__] = _moved
