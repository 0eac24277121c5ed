"""The data of a text-classification run (objective seq_cls): labelled files, tokenized as the text-classification
pipeline tokenizes them, and drawn in epochs.

Texts are tokenized by the tokenizer of the folder being fine-tuned, with what it adds around a text, and cut at
`context_length` tokens, so the published folder's `pipeline("text-classification")` sees what training saw.
A text is plain text: `<|endoftext|>` spelled inside it is its characters, never the control token.
A batch is right-padded to its longest text and carries its attention mask. Training draws the examples in
epochs, each a permutation seeded by (seed, epoch): the examples of a step follow from the step alone, so a
resumed run trains on exactly the examples of an uninterrupted one.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ...corpus.labelled import LabelSet, LabelledFile, hold_out, majority_accuracy, read_labelled
from ...tokenization.plain_text import encode_plain
from ..config import TrainConfig, check_context_length
from ..data import RunData
from ..run.summary import ClassificationTask, DataProvenance


@dataclass
class LabelledTokens:
    """Tokenized texts and their label ids."""

    ids: list[np.ndarray]  # one int64 array of token ids per text
    labels: np.ndarray  # (examples,) int64 label ids

    def __len__(self) -> int:
        return len(self.labels)

    def digest(self) -> str:
        """`token_digest` of the examples: every text's ids and length, and the labels."""
        from ...corpus.token_files import token_digest

        lengths = np.array([len(ids) for ids in self.ids], dtype=np.int64)
        return token_digest(np.concatenate([*(np.asarray(ids, dtype=np.int64) for ids in self.ids), lengths,
                                            np.asarray(self.labels, dtype=np.int64)]))

    @property
    def tokens(self) -> int:
        """Tokens in all the texts."""
        return sum(len(ids) for ids in self.ids)

    def batch(self, indices: Sequence[int], pad_id: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(input_ids, labels, attention_mask) of the examples at `indices`, right-padded to the longest text."""
        rows = [self.ids[i] for i in indices]
        input_ids = np.full((len(rows), max(len(r) for r in rows)), pad_id, dtype=np.int64)  # (B, T)
        mask = np.zeros_like(input_ids)
        for row, ids in enumerate(rows):
            input_ids[row, :len(ids)] = ids
            mask[row, :len(ids)] = 1
        labels = self.labels[np.asarray(indices, dtype=np.int64)]
        return torch.from_numpy(input_ids), torch.from_numpy(labels), torch.from_numpy(mask)

    def batches(self, batch_size: int, pad_id: int) -> Iterator[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
        """Every example once, in order, `batch_size` at a time."""
        for start in range(0, len(self), batch_size):
            yield self.batch(range(start, min(start + batch_size, len(self))), pad_id)


def epoch_indices(n: int, start: int, count: int, seed: int) -> np.ndarray:
    """Draws `start` to `start + count` of an endless walk through epochs of `n` examples, each epoch a
    permutation seeded by (seed, epoch)."""
    epochs, positions = np.divmod(np.arange(start, start + count), n)
    return np.array([_permutation(n, seed, int(epoch))[position] for epoch, position in zip(epochs, positions)])


@lru_cache(maxsize=4)
def _permutation(n: int, seed: int, epoch: int) -> np.ndarray:
    return np.random.default_rng([seed, epoch]).permutation(n)


@dataclass
class ClassificationData(RunData):
    """The tokenized training and validation examples of a seq_cls run, with its labels and padding token."""

    train: LabelledTokens
    val: LabelledTokens
    pad_id: int
    """Pads batches; the classifier's `pad_token_id` (a causal model pools the last token that is not it)."""
    task: ClassificationTask

    def model_options(self) -> dict[str, Any]:
        """The classifier's config values that the data decides: its labels and padding token."""
        names = self.task.labels
        return {"num_labels": len(names), "id2label": dict(enumerate(names)),
                "label2id": {name: i for i, name in enumerate(names)}, "pad_token_id": self.pad_id,
                "problem_type": "single_label_classification"}


def open_classification_data(config: TrainConfig) -> ClassificationData:
    """Check the folder to fine-tune, then read, label, split and tokenize the labelled files of a seq_cls run."""
    from ..model_folder import model_folder_name
    from ...tokenizer_loading import load_tokenizer
    from ...corpus.token_files import tokenizer_fingerprint

    model_config = check_base_folder(config.init_from)
    check_context_length(config.context_length, model_config.get("max_position_embeddings", 0))
    tokenizer = load_tokenizer(config.init_from)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    if pad_id is None:
        raise ValueError(f"the tokenizer in {config.init_from} has neither a pad nor an end-of-text token to pad with")
    labelled = read_labelled(config.train_file, config.text_column, config.label_column)
    label_set = LabelSet.of(labelled, config.label_column, config.label_names)
    check_head_labels(model_config, label_set.names, config.init_from)
    (train_texts, train_labels), (val_texts, val_labels), where = split_examples(config, labelled, label_set)
    train = tokenize(tokenizer, train_texts, train_labels, config.context_length)
    val = tokenize(tokenizer, val_texts, val_labels, config.context_length)
    task = ClassificationTask(
        labels=label_set.names, text_column=config.text_column, label_column=config.label_column,
        train_examples=len(train), validation_examples=len(val), validation=where,
        majority_accuracy=majority_accuracy(train.labels, val.labels), base_model=model_folder_name(config.init_from))
    provenance = DataProvenance(
        input_files=[labelled.name], val_files=[Path(config.validation_file).name] if config.validation_file else [],
        train_tokens=train.tokens, val_tokens=val.tokens, documents=len(train), tokenizer_dir=config.init_from,
        tokenizer_fingerprint=tokenizer_fingerprint(tokenizer), token_digest=f"{train.digest()}+{val.digest()}")
    return ClassificationData(provenance, len(tokenizer), tokenizer.eos_token_id, train=train, val=val, pad_id=pad_id,
                              task=task)


Examples = tuple[list[str], np.ndarray]  # (texts, label ids)


def split_examples(config: TrainConfig, labelled: LabelledFile,
                   label_set: LabelSet) -> tuple[Examples, Examples, str]:
    """(training examples, validation examples, where the validation examples come from)."""
    labels = label_set.encode(labelled)
    if config.validation_file:
        validation = read_labelled(config.validation_file, config.text_column, config.label_column)
        return (labelled.texts, labels), (validation.texts, label_set.encode(validation)), validation.name
    train, held = hold_out(labels, config.validation_share)
    if not len(held):
        raise ValueError(f"{labelled.name} has too few examples of each label to hold some out for validation; "
                         "pass a validation file (--val-data)")
    where = f"{config.validation_share:.0%} of each label of {labelled.name}, held out"
    return ([labelled.texts[i] for i in train], labels[train]), ([labelled.texts[i] for i in held], labels[held]), where


def tokenize(tokenizer: Any, texts: list[str], labels: np.ndarray, context_length: int) -> LabelledTokens:
    """The texts as the text-classification pipeline tokenizes them (with what the tokenizer adds), cut at
    `context_length` tokens; special-token text inside a text is plain text (`encode_plain`)."""
    ids = encode_plain(tokenizer, texts, add_special_tokens=True, truncation=True, max_length=context_length)
    return LabelledTokens([np.asarray(row, dtype=np.int64) for row in ids], labels)


def check_head_labels(model_config: dict[str, Any], names: list[str], folder: str | None) -> None:
    """A classifier folder fine-tunes again only on its own labels: its head has one row per label, in its order."""
    if not any(a.endswith("ForSequenceClassification") for a in model_config.get("architectures") or []):
        return
    id2label = model_config.get("id2label") or {}
    held = [str(id2label.get(str(i), id2label.get(i, i))) for i in range(len(id2label))]
    if held != list(names):
        raise ValueError(f"{folder} is a classifier of {len(held)} labels ({', '.join(held)}) and the data has "
                         f"{len(names)} ({', '.join(names)}): its head fits only its own labels; fine-tune the language "
                         "model it was made from, or give data of the same labels")


def check_base_folder(folder: str | None) -> dict[str, Any]:
    """The config.json of the TinyLM folder to fine-tune; a folder that is not one is an error saying what it is."""
    from ..model_folder import check_folder_files

    config = check_folder_files(str(folder))
    if config.get("model_type") != "tinylm":
        kind = f"a {config['model_type']!r} model" if config.get("model_type") else "a config without a model_type"
        raise ValueError(f"{folder} holds {kind}, not a TinyLM: fine-tune a folder written by `tinylm train` or "
                         "`tinylm quickstart` (a run's hf/ folder)")
    return config
