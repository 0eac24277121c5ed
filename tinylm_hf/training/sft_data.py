"""The old name of `tinylm_hf.training.objectives.sft_data` (chat fine-tuning's conversations): importing it gives that module itself, so old
imports and monkeypatches keep working."""

import sys

from .objectives import sft_data as _moved

sys.modules[__name__] = _moved
