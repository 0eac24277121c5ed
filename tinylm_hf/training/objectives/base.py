"""What an objective is: the one base every training objective implements, and what the loop, the step, the card
writer and the publisher ask of it.

An objective owns its configuration section (`section`: its name, its fields `config_fields`, validated by
`check_config`), its data (`open_data`) and micro-batches, its loss (`step_loss`: by default the cross-entropy on
the batch's labels, `step.LabelCrossEntropy`), its evaluation and metrics, the text its model card states
(`describe_objective`, `describe_training`, `card_results`) and what its published folder is (`published_as`, a
`PublishedKind`: what loads it and whether it carries a generation config; `prepare_tokenizer`). The callers ask;
they never branch on an objective's name.
"""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

import torch

from ..batches import sample_starts
from ..config import TrainConfig
from ..data import RunData, TrainingData, open_data
from ..run.summary import ClassificationTask
from ..step import LabelCrossEntropy, compiled_cross_entropy
from .sections import ConfigSection

if TYPE_CHECKING:
    from ..run.summary import RunSummary



@dataclass(frozen=True)
class PublishedKind:
    """What a published folder is: the transformers auto class that loads it, and whether the folder carries a
    generation_config.json (sampling settings and stop tokens for `generate`)."""

    auto_class: str
    generation_config: bool


PUBLISHED_KINDS = {
    "causal language model": PublishedKind("AutoModelForCausalLM", generation_config=True),
    "encoder": PublishedKind("AutoModelForMaskedLM", generation_config=False),  # an encoder does not generate
    "classifier": PublishedKind("AutoModelForSequenceClassification", generation_config=True),  # its base model's
    "chat model": PublishedKind("AutoModelForCausalLM", generation_config=True),
}
"""What a published folder can be (`Objective.published_as`) -> what loads it, and whether it carries a generation
config."""


class StepLoss(Protocol):
    """An objective's own loss: the step divides each micro-batch's summed loss by the step's count of units."""

    def count(self, batch: Sequence[torch.Tensor]) -> torch.Tensor:
        """The units a micro-batch's loss is summed over (pairs, sequences), as a tensor (no device sync)."""

    def __call__(self, model: torch.nn.Module, batch: Sequence[torch.Tensor],
                 autocast: contextlib.AbstractContextManager) -> torch.Tensor:
        """The micro-batch's loss, summed over its units (a scalar that backpropagates to `model`)."""


def data_tokenizer_dir(config: TrainConfig, data: TrainingData) -> str | None:
    """The data's tokenizer folder: `tokenizer_dir`, else the one prepare recorded."""
    return config.tokenizer_dir or data.provenance.tokenizer_dir


class Objective(ABC):
    """What the loop asks of a training objective (`window_starts` serves those that train on windows of train.bin)."""

    section: ClassVar[type[ConfigSection]]
    """Its configuration section (`sections`): its name, its own TrainConfig fields and their checks."""
    name: ClassVar[str]
    """The objective's name (`TrainConfig.objective`), its section's."""
    masking: str | None = None
    """The masking strategy, for the run summary (masked-LM objectives only)."""
    task: ClassificationTask | None = None
    """The labels, data and baseline, for the run summary (classification objectives only)."""
    extends_vocabulary: ClassVar[bool] = False
    """True when the data's tokenizer may hold tokens the `init_from` model lacks: its embeddings grow to fit."""

    config_fields: ClassVar[tuple[str, ...]] = ()
    """The TrainConfig fields of this objective's own section (its command sets or names them)."""
    published_as: ClassVar[str] = "causal language model"
    """What its published folder is: one of `PUBLISHED_KINDS`."""
    keeps_base_record: ClassVar[bool] = False
    """True when its card quotes the training record of the `init_from` model's card (a fine-tuned chat model's)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "section" in cls.__dict__:
            cls.name, cls.config_fields = cls.section.name, cls.section.field_names()

    @classmethod
    def check_config(cls, config: TrainConfig) -> None:
        """Refuse a config this objective cannot run: a bad value of its own fields, or something it needs missing
        (`TrainConfig` asks this when it is made)."""
        cls.section.check_values(config)
        cls.section.check_run(config)

    @classmethod
    def publishes(cls) -> PublishedKind:
        """What its published folder is (`published_as`): what loads it, whether it carries a generation config."""
        return PUBLISHED_KINDS[cls.published_as]

    @classmethod
    def prepare_tokenizer(cls, tokenizer: Any, model_config: Any, summary: RunSummary) -> None:
        """Set what the published tokenizer needs for this kind of model (`tokenizer` is the publisher's own copy);
        nothing by default."""

    label_loss: LabelCrossEntropy | None = None

    def step_loss(self) -> StepLoss:
        """The objective's loss, the step's `step_loss`: by default the cross-entropy on each batch's labels
        (`LabelCrossEntropy`), compiled beside a compiled model (`config.compile`)."""
        if self.label_loss is None:
            self.label_loss = LabelCrossEntropy(compiled_cross_entropy() if self.config.compile else None)
        return self.label_loss

    @classmethod
    def describe_objective(cls, summary: RunSummary) -> str:
        """The card's `- objective:` line: what the run learnt."""
        return cls.section.summary

    @classmethod
    def describe_training(cls, summary: RunSummary, lines: list[str], *, base: str | None, optimizer: str,
                          run_lines: list[str]) -> str:
        """The model card's training section, given the card's generic `lines` (the objective line first, then steps,
        tokens, context, validation values and `run_lines`), the name of the model it started from (`base`, None for
        a new model), the optimizer in words and the run's time and settings (`run_lines`). By default: a model
        trained from scratch with `tinylm train`."""
        head = (f"Trained from scratch with `tinylm train` ({optimizer}, cosine schedule with warm-up, "
                "gradient clipping).")
        return head + "\n\n" + "\n".join(lines)

    @classmethod
    def card_results(cls, summary: RunSummary) -> dict[str, Any] | None:
        """The card's evaluation results, or None for the card writer's own (language-model metrics)."""
        return None

    def __init__(self, config: TrainConfig, data: RunData) -> None:
        self.config = config
        self.data = data

    @classmethod
    def open_data(cls, config: TrainConfig) -> RunData:
        """The run's data, checked before any model is built (default: train.bin and val.bin of `data_dir`)."""
        return open_data(config)

    @classmethod
    @abstractmethod
    def open(cls, config: TrainConfig, data: RunData, *, main: bool) -> Objective:
        """The objective for a run on `data` (loading what it needs); `main` is true in the process that evaluates."""

    @staticmethod
    @abstractmethod
    def model_class() -> type:
        """The TinyLM class a new run of this objective builds."""

    def step_metrics(self, all_reduce: Callable[[torch.Tensor], torch.Tensor] | None = None) -> dict[str, float]:
        """The objective's own numbers of the step just done, for its metrics record (DPO's rewards), averaged over
        DDP ranks by `all_reduce`; none by default."""
        return {}

    def checkpoint_state(self) -> dict[str, Any]:
        """What the objective computed that a resumed run must reuse rather than compute again (tensors and plain
        values; kept in each checkpoint); nothing by default."""
        return {}

    def restore_state(self, state: dict[str, Any]) -> None:
        """Take back what `checkpoint_state` returned when the checkpoint was saved (empty for a checkpoint without)."""

    def model_options(self) -> dict[str, Any]:
        """Config values of the model that the objective decides (a classifier's labels); none by default."""
        return {}

    @abstractmethod
    def micro_batch(self, sampler: torch.Generator, size: int, rows: slice, device: torch.device,
                    seed: tuple[int, ...]) -> tuple[torch.Tensor, ...]:
        """(inputs, labels[, attention_mask]) of this rank's `rows` of a micro-batch of `size` examples drawn from
        `sampler`.

        `seed` (the run's seed, iteration and micro-step) seeds any other randomness, so that resumed and
        multi-process runs see exactly the batches of one uninterrupted process.
        """

    @abstractmethod
    def evaluate(self, model: torch.nn.Module, batch_size: int, device: torch.device,
                 autocast: contextlib.AbstractContextManager) -> dict[str, Any]:
        """The evaluation record (metrics.jsonl's names: `val_loss`, `val_perplexity`, ...) on val.bin."""

    def window_starts(self, sampler: torch.Generator, size: int) -> torch.Tensor:
        """`size` random starts of context-length windows in train.bin."""
        return sample_starts(len(self.data.train), size, self.config.context_length, sampler)
