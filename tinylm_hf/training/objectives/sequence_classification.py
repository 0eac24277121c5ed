"""Text classification: a classification head on a pretrained TinyLM (TinyLMForSequenceClassification on the
`init_from` folder), fine-tuned on labelled texts (`classification_data`: read, labelled, split and tokenized).
Its batches are `(input_ids, labels, attention_mask)`, one label a text; each evaluation scores every validation
example (loss, accuracy, macro-F1). Its published folder is a classifier whose tokenizer pads and cuts texts as
training did; its card reports accuracy and macro-F1 against the majority-class baseline.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

import torch

from ..config import TrainConfig
from ..validation import evaluate_classifier
from .base import Objective
from .classification_data import ClassificationData, epoch_indices, open_classification_data
from .sections import SequenceClassificationSection

if TYPE_CHECKING:
    from ..run.summary import RunSummary


def prepare_classifier_tokenizer(tokenizer: Any, pad_token_id: int, context_length: int) -> None:
    """A classifier's tokenizer pads with the classifier's pad token, `truncation=True` cuts a text where
    training did, and special-token text in a text is plain text, as training encoded it (`encode_plain`)."""
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.convert_ids_to_tokens(pad_token_id)
    tokenizer.model_max_length = context_length
    tokenizer.split_special_tokens = True
    tokenizer.init_kwargs["split_special_tokens"] = True  # what save_pretrained writes to tokenizer_config.json


class SequenceClassification(Objective):
    """Text classification (TinyLMForSequenceClassification on the `init_from` folder) on labelled texts.

    Examples are drawn in epochs (`classification_data.epoch_indices`, seeded by the run's seed), each
    micro-batch padded to its longest text; an evaluation scores every validation example (loss, accuracy,
    macro-F1).
    """

    section = SequenceClassificationSection
    published_as = "classifier"

    def __init__(self, config: TrainConfig, data: ClassificationData) -> None:
        super().__init__(config, data)
        self.task = data.task

    @classmethod
    def open_data(cls, config: TrainConfig) -> ClassificationData:
        return open_classification_data(config)

    @classmethod
    def open(cls, config: TrainConfig, data: ClassificationData, *, main: bool) -> SequenceClassification:
        task = data.task
        if main:
            print(f"{task.train_examples} training examples of {data.provenance.name}, {task.validation_examples} "
                  f"for validation ({task.validation}); labels {', '.join(task.labels)}; majority-class "
                  f"baseline {task.majority_accuracy:.3f}")
        return cls(config, data)

    @staticmethod
    def model_class() -> type:
        from ...modeling import TinyLMForSequenceClassification

        return TinyLMForSequenceClassification

    def model_options(self) -> dict[str, Any]:
        return self.data.model_options()

    def micro_batch(self, sampler: torch.Generator, size: int, rows: slice, device: torch.device,
                    seed: tuple[int, ...]) -> tuple[torch.Tensor, ...]:
        run_seed, step, micro_step = seed
        first = (step * self.config.grad_accum_steps + micro_step) * size  # examples drawn before this micro-batch
        indices = epoch_indices(len(self.data.train), first, size, run_seed)
        batch = self.data.train.batch(indices, self.data.pad_id)  # padded to the longest text of all ranks' rows
        return tuple(t[rows].to(device) for t in batch)

    def evaluate(self, model: torch.nn.Module, batch_size: int, device: torch.device,
                 autocast: contextlib.AbstractContextManager) -> dict[str, Any]:
        return evaluate_classifier(model, self.data.val.batches(batch_size, self.data.pad_id), device, autocast)

    @classmethod
    def prepare_tokenizer(cls, tokenizer: Any, model_config: Any, summary: RunSummary) -> None:
        prepare_classifier_tokenizer(tokenizer, model_config.pad_token_id, summary.context_length)

    @classmethod
    def describe_objective(cls, summary: RunSummary) -> str:
        labels = summary.task.labels if summary.task else []
        return f"text classification into {len(labels)} labels: {', '.join(f'`{n}`' for n in labels)}"

    @classmethod
    def describe_training(cls, summary: RunSummary, lines: list[str], *, base: str | None, optimizer: str,
                          run_lines: list[str]) -> str:
        """What the classifier was fine-tuned from, on how many examples, and how it scores against the baseline."""
        task = summary.task
        if task is None:
            return super().describe_training(summary, lines, base=base, optimizer=optimizer, run_lines=run_lines)
        examples = summary.iterations * summary.batch_size
        values = (("final training loss", summary.loss), ("validation loss", summary.val_loss),
                  ("validation accuracy", summary.val_accuracy), ("validation macro-F1", summary.val_macro_f1),
                  ("majority-class baseline (validation accuracy)", task.majority_accuracy))
        lines = [
            lines[0],
            f"- fine-tuned from: `{task.base_model}`",
            f"- optimizer steps: {summary.iterations:,}",
            f"- examples seen: {examples:,} ({examples / max(task.train_examples, 1):.1f} epochs of "
            f"{task.train_examples:,} training examples)",
            f"- texts cut at {summary.context_length} tokens; batch {summary.batch_size} texts",
            *(f"- {label}: {value:.4f}" for label, value in values if value is not None),
            *run_lines,
        ]
        head = (f"Fine-tuned with `tinylm finetune` (the loop of `tinylm train`: {optimizer}, cosine schedule with "
                "warm-up, gradient clipping); the classification head started from random weights.")
        return head + "\n\n" + "\n".join(lines)

    @classmethod
    def card_results(cls, summary: RunSummary) -> dict[str, Any] | None:
        """Accuracy and macro-F1 of the last evaluation (no language-model metric)."""
        task = summary.task
        if task is None or summary.val_accuracy is None:
            return {}
        return {"accuracy": summary.val_accuracy, "f1": summary.val_macro_f1, "dataset": task.validation}
