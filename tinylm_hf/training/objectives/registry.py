"""The table of objective classes by name, which the loop, the card writer and the publisher ask."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..config import TrainConfig
from ..data import RunData
from .base import Objective
from .causal_lm import CausalLM
from .dpo import DirectPreferenceOptimization
from .masked_lm import MaskedLM
from .sections import DEFAULT_OBJECTIVE
from .sequence_classification import SequenceClassification
from .sft import SupervisedFineTuning

OBJECTIVE_CLASSES: dict[str, type[Objective]] = {
    cls.name: cls
    for cls in (CausalLM, MaskedLM, SupervisedFineTuning, SequenceClassification, DirectPreferenceOptimization)
}
"""`TrainConfig.objective` -> its objective (the keys of `sections.SECTIONS`, in its order)."""


def objective_class(name: str | None, model_config: Mapping[str, Any] | None = None) -> type[Objective]:
    """The objective `name`; without one (a checkpoint or summary from before objectives), the one whose model
    `model_config` describes: a masked LM for a bidirectional model, else a causal LM."""
    if name:
        if name not in OBJECTIVE_CLASSES:
            raise ValueError(f"unknown objective {name!r} (a run of a newer tinylm_hf?): this one knows "
                             f"{', '.join(OBJECTIVE_CLASSES)}")
        return OBJECTIVE_CLASSES[name]
    if model_config and model_config.get("use_bidirectional_attention"):
        return MaskedLM
    return OBJECTIVE_CLASSES[DEFAULT_OBJECTIVE]


def open_objective(config: TrainConfig, data: RunData, *, main: bool) -> Objective:
    """The objective `config.objective` names, ready to draw batches from `data` and to evaluate."""
    return OBJECTIVE_CLASSES[config.objective].open(config, data, main=main)
