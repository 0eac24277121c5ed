"""The old name of `tinylm_hf.training.run.checkpoint`: importing it gives that module, so old imports keep working.

A package rather than checkpoint.py, so that git sees checkpoint.py renamed to run/checkpoint.py and carries edits made to it
on other branches into the moved file.
"""

import sys

from ..run import checkpoint as _moved

sys.modules[__name__] = _moved
