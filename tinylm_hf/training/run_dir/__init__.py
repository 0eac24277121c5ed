"""The old name of `tinylm_hf.training.run.folder`: importing it gives that module, so old imports keep working.

A package rather than run_dir.py, so that git sees run_dir.py renamed to run/folder.py and carries edits made to it
on other branches into the moved file.
"""

import sys

from ..run import folder as _moved

sys.modules[__name__] = _moved
