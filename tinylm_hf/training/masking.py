"""The old name of `tinylm_hf.training.objectives.masking` (the masked LM's collator): importing it gives that module itself, so old
imports and monkeypatches keep working."""

import sys

from .objectives import masking as _moved

sys.modules[__name__] = _moved
