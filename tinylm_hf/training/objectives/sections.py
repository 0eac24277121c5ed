"""The training objectives by name, and each one's configuration section: its TrainConfig fields, their group in
`--help`, and the checks of a run of it.

Light to import (no torch, nothing that imports the config): `TrainConfig` is built from these sections and asks
the run's section to check it, and the command line builds its flag groups from them, before any model code loads.
Everything else an objective is (data, batches, loss, evaluation, card text, published folder) is its module
beside this one (`causal_lm`, `masked_lm`, `sft`, `sequence_classification`, `dpo`), which names its section.
Another objective is one more section here and one more module.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, ClassVar

if TYPE_CHECKING:
    from ..config import TrainConfig

MASKING_STRATEGIES = ("static", "dynamic", "whole_word", "ngram", "span")  # MLMCollator's (objectives/masking.py)


class ConfigSection:
    """What the config knows of one objective: its name, its own fields (`fields`, a dataclass that TrainConfig
    inherits, so the flat fields stay TrainConfig's) and the checks of a run of it."""

    name: ClassVar[str]
    """The objective's name: `TrainConfig.objective`, recorded by run summaries and checkpoints."""
    title: ClassVar[str]
    """The heading of its fields in `--help`."""
    summary: ClassVar[str]
    """What the objective trains, in one line (the `--objective` help)."""
    fields: ClassVar[type | None] = None
    """The dataclass of its own TrainConfig fields (None: it has none)."""

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        """The names of its own TrainConfig fields, in order."""
        return tuple(getattr(cls.fields, "__dataclass_fields__", {}))

    @classmethod
    def check_values(cls, config: TrainConfig) -> None:
        """Refuse a bad value of its own fields (whatever the run's objective: a value given is a value checked)."""

    @classmethod
    def check_run(cls, config: TrainConfig) -> None:
        """Refuse a config this objective cannot run (what it needs beyond its own fields' values)."""


def need_prepared_data(config: TrainConfig) -> None:
    """The language-model objectives train on the folder `tinylm prepare` made."""
    if not config.data_dir:
        raise ValueError("data_dir is required: the folder made by `tinylm prepare`")


class CausalLMSection(ConfigSection):
    name = "clm"
    title = "causal language modelling (objective clm)"
    summary = "next-token prediction (TinyLMForCausalLM)"

    @classmethod
    def check_run(cls, config: TrainConfig) -> None:
        need_prepared_data(config)


@dataclass
class MaskedLMFields:
    masking: str = "dynamic"
    """MLM masking strategy: static (needs `tinylm prepare --mlm-static`), dynamic, whole_word, ngram or span."""
    mlm_probability: float = 0.15
    """Share of the tokens chosen for masked-LM prediction, in (0, 1)."""


class MaskedLMSection(ConfigSection):
    name = "mlm"
    title = "masked language modelling (objective mlm)"
    summary = "masked-token prediction (TinyLMForMaskedLM, an encoder)"
    fields = MaskedLMFields

    @classmethod
    def check_values(cls, config: TrainConfig) -> None:
        if config.masking not in MASKING_STRATEGIES:
            raise ValueError(f"masking must be one of {', '.join(MASKING_STRATEGIES)}, got {config.masking!r}")
        p = config.mlm_probability
        if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0 < p < 1:
            raise ValueError(f"mlm_probability must be strictly between 0 and 1 (e.g. 0.15), got {p!r}")

    @classmethod
    def check_run(cls, config: TrainConfig) -> None:
        need_prepared_data(config)


@dataclass
class ConversationFields:
    conversations: str | None = None
    """Objective sft: JSON-lines file of {"messages": [{"role", "content"}, ...]} conversations to fine-tune on."""
    val_conversations: str | None = None
    """Objective sft: JSON-lines conversations to validate on (default: the trailing 5% of `conversations`)."""


class SFTSection(ConfigSection):
    name = "sft"
    title = "chat fine-tuning (objective sft)"
    summary = "supervised fine-tuning on `conversations`, the loss on the assistant's tokens only (`tinylm sft`)"
    fields = ConversationFields

    @classmethod
    def check_run(cls, config: TrainConfig) -> None:
        if not config.conversations:
            raise ValueError("objective sft needs conversations: a JSON-lines file of {\"messages\": [...]} objects")


@dataclass
class LabelledDataFields:
    train_file: str | None = None
    """Labelled examples to fine-tune on: JSON lines (.jsonl), JSON or CSV, one text and one label a row."""
    validation_file: str | None = None
    """Labelled examples that accuracy and macro-F1 are measured on (default: validation_share of train_file)."""
    validation_share: float = 0.1
    """Share of each label's examples of train_file held out for validation when there is no validation_file
    (the same examples in every run of the file)."""
    text_column: str = "text"
    """The column holding the texts."""
    label_column: str = "label"
    """The column holding the labels: strings (their own names) or integers."""
    label_names: list[str] | None = None
    """Names of the integer labels 0, 1, 2, ... in order (default: integer labels are named by their digits)."""


class SequenceClassificationSection(ConfigSection):
    name = "seq_cls"
    title = "labelled data (objective seq_cls)"
    summary = "text classification (TinyLMForSequenceClassification on init_from, from labelled train_file)"
    fields = LabelledDataFields

    @classmethod
    def check_values(cls, config: TrainConfig) -> None:
        share = config.validation_share
        if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0 < share < 1:
            raise ValueError(f"validation_share must be strictly between 0 and 1 (e.g. 0.1), got {share!r}")
        for name in ("text_column", "label_column"):
            if not isinstance(getattr(config, name), str) or not getattr(config, name):
                raise ValueError(f"{name} must name a column, got {getattr(config, name)!r}")
        names = config.label_names
        if names is not None and (len(names) < 2 or len(set(names)) != len(names)
                                  or not all(isinstance(n, str) and n for n in names)):
            raise ValueError(f"label_names must be two or more different names, got {names!r}")

    @classmethod
    def check_run(cls, config: TrainConfig) -> None:
        if not config.train_file:
            raise ValueError("objective seq_cls needs train_file: a .jsonl, .json or .csv file of labelled texts")
        if not config.init_from:
            raise ValueError("objective seq_cls needs init_from: the TinyLM folder to fine-tune (a run's hf/ folder)")


@dataclass
class PreferenceFields:
    preferences: str | None = None
    """Objective dpo: JSON-lines preference pairs in TRL's format ({"prompt", "chosen", "rejected"} a line)."""
    val_preferences: str | None = None
    """Objective dpo: JSON-lines pairs to validate on (default: the trailing 5% of `preferences`)."""
    dpo_beta: float = 0.1
    """Objective dpo: DPO's beta, how far the tuned model may move from the starting model (the reference)."""


class PreferenceSection(ConfigSection):
    name = "dpo"
    title = "preference pairs (objective dpo)"
    summary = "preference tuning of the init_from chat model on `preferences` pairs (`tinylm dpo`)"
    fields = PreferenceFields

    @classmethod
    def check_values(cls, config: TrainConfig) -> None:
        if not math.isfinite(config.dpo_beta) or config.dpo_beta <= 0:
            raise ValueError(f"dpo_beta must be a positive number (e.g. 0.1), got {config.dpo_beta!r}")

    @classmethod
    def check_run(cls, config: TrainConfig) -> None:
        """A dpo run needs pairs and the chat model to tune (its frozen copy is the reference)."""
        if not config.preferences:
            raise ValueError('objective dpo needs preferences: a JSON-lines file of {"prompt", "chosen", "rejected"}')
        if not config.init_from:
            raise ValueError("objective dpo needs init_from: the chat model to tune (a `tinylm sft` run's hf/ folder)")


SECTIONS: dict[str, type[ConfigSection]] = {
    section.name: section
    for section in (CausalLMSection, MaskedLMSection, SFTSection, SequenceClassificationSection, PreferenceSection)
}
"""Objective name -> its section, in the order `--help` lists them (objectives.OBJECTIVE_CLASSES has the same keys)."""
FIELD_SECTIONS = tuple(section.fields for section in reversed(SECTIONS.values()) if section.fields is not None)
"""The bases of TrainConfig: the objectives' field dataclasses, last first, so that its fields follow SECTIONS' order."""
DEFAULT_OBJECTIVE = CausalLMSection.name
"""A run's objective when none is given (and that of checkpoints and summaries from before objectives)."""


def objective_section(name: str) -> type[ConfigSection]:
    """The section of the objective `name`; a ValueError naming the objectives otherwise."""
    if name not in SECTIONS:
        raise ValueError(f"objective must be one of {', '.join(SECTIONS)}, got {name!r}")
    return SECTIONS[name]


def check_fields_of_objective(objective: str, given: Iterable[str], *, spell: Callable[[str], str] = str) -> None:
    """Refuse a field of another objective's section among `given` (the fields a user set): a run of `objective`
    would ignore it, and train something else than asked without a word. `spell` names a field as the user wrote it
    (a flag, a config-file key)."""
    objective_section(objective)
    for name in given:
        owner = next((s for s in SECTIONS.values() if name in s.field_names()), None)
        if owner is not None and owner.name != objective:
            raise ValueError(f"{spell(name)} is a setting of objective {owner.name} ({owner.title}), but this run's "
                             f"objective is {objective}, which would ignore it: drop it, or train objective "
                             f"{owner.name}")
