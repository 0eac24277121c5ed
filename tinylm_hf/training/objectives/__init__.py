"""Training objectives: one module per objective over one base (`base.Objective`), and the table the loop reads.

The loop is the same for every objective; an objective decides the data, the model class, each micro-batch, its
loss, its evaluation, its card text and what its folder is published as (`base`). `dpo` (preference tuning) is
the first objective in its own module; causal LM, masked LM, chat fine-tuning and text classification still live
together in `legacy`. Another objective is one more module and one more entry in `OBJECTIVE_CLASSES`.
"""

from __future__ import annotations

from ..config import TrainConfig
from ..data import RunData
from .base import PUBLISHED_KINDS, Objective, StepLoss, data_tokenizer_dir
from .dpo import DirectPreferenceOptimization
from .legacy import CausalLM, MaskedLM, SequenceClassification, SupervisedFineTuning

__all__ = [
    "OBJECTIVE_CLASSES", "PUBLISHED_KINDS", "CausalLM", "DirectPreferenceOptimization", "MaskedLM", "Objective",
    "SequenceClassification", "StepLoss", "SupervisedFineTuning", "data_tokenizer_dir", "open_objective",
]

OBJECTIVE_CLASSES: dict[str, type[Objective]] = {
    cls.name: cls
    for cls in (CausalLM, MaskedLM, SupervisedFineTuning, SequenceClassification, DirectPreferenceOptimization)
}
"""`TrainConfig.objective` -> its objective (config.OBJECTIVES names the same keys for validation)."""


def open_objective(config: TrainConfig, data: RunData, *, main: bool) -> Objective:
    """The objective `config.objective` names, ready to draw batches from `data` and to evaluate."""
    return OBJECTIVE_CLASSES[config.objective].open(config, data, main=main)
