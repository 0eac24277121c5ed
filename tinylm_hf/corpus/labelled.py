"""Labelled text files for fine-tuning a classifier: read a text and a label column, name the labels, hold out a
validation share.

A file is JSON lines (``.jsonl``), JSON (``.json``) or CSV (``.csv``), read with ``datasets``. Labels are all
strings or all integers: string labels are named by themselves and numbered in sorted order; integer labels are
numbered in sorted order and named by their digits, unless ``label_names`` names ids 0, 1, 2, ... (then an
integer label is its own id). Every problem is a ``ValueError`` (``FileNotFoundError`` for a missing file)
naming the file, the row or the column, and what to change.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..fileio import check_input_file
READERS = {".jsonl": "from_json", ".json": "from_json", ".csv": "from_csv"}  # suffix -> datasets.Dataset method
HOLD_OUT_SEED = 0  # the held-out validation examples are the same in every run of a file and share


@dataclass
class LabelledFile:
    """The texts and raw labels (as the file holds them) of one labelled file."""

    name: str
    """The file's base name (what run summaries and model cards record; never a path)."""
    texts: list[str]
    labels: list[Any]


@dataclass
class LabelSet:
    """Label names by id, and how a raw label (a string or an integer of the file) maps to its id."""

    names: list[str]
    ids: dict[Any, int]  # raw label -> id

    @classmethod
    def of(cls, labelled: LabelledFile, column: str, names: list[str] | None = None) -> LabelSet:
        """The labels of a training file, checked: one kind, at least two classes, every integer named."""
        values = set(labelled.labels)
        if len(values) < 2:
            raise ValueError(
                f"the label column {column!r} of {labelled.name} holds one class ({next(iter(values))!r}): a "
                "classifier needs examples of at least two labels; pass the right --label-column"
            )
        if all(isinstance(v, str) for v in values):
            if names:
                raise ValueError(f"--label-names names integer labels, but the labels of {labelled.name} are strings "
                                 "(they name themselves): leave --label-names out")
            ordered = sorted(values)
            return cls(list(ordered), {v: i for i, v in enumerate(ordered)})
        if not names:
            ordered = sorted(values)
            return cls([str(v) for v in ordered], {v: i for i, v in enumerate(ordered)})
        outside = sorted(v for v in values if not 0 <= v < len(names))
        if outside:
            raise ValueError(f"{labelled.name} has label {outside[0]}, outside the ids 0..{len(names) - 1} that "
                             f"--label-names names ({', '.join(names)})")
        return cls(list(names), {i: i for i in range(len(names))})

    def encode(self, labelled: LabelledFile) -> np.ndarray:
        """The label id of every example (int64); a label the set does not know is an error naming it."""
        unknown = sorted({str(v) for v in labelled.labels if v not in self.ids})
        if unknown:
            raise ValueError(f"{labelled.name} has label(s) {', '.join(unknown[:5])} that the training data does not "
                             f"have (its labels: {', '.join(self.names)})")
        return np.array([self.ids[v] for v in labelled.labels], dtype=np.int64)


def read_labelled(path: str | os.PathLike, text_column: str, label_column: str) -> LabelledFile:
    """The non-empty texts and labels of a labelled file; a missing column, an empty file or a bad row is an error."""
    path = Path(path)
    rows = _read_rows(path)
    for column, flag in ((text_column, "--text-column"), (label_column, "--label-column")):
        if column not in rows.column_names:
            raise ValueError(f"{path.name} has no column {column!r} (its columns: {', '.join(rows.column_names)}); "
                             f"name the right one with {flag}")
    texts, labels = rows[text_column], rows[label_column]
    for row, (text, label) in enumerate(zip(texts, labels), start=1):
        if not isinstance(text, str) or not text.strip():
            raise ValueError(f"row {row} of {path.name} has no text in column {text_column!r} (got {text!r})")
        if isinstance(label, float) or not isinstance(label, (str, int)):
            raise ValueError(f"row {row} of {path.name} has label {label!r} in column {label_column!r}: labels must "
                             "be strings or integers (a class, not a number to regress)")
    if len({type(label) for label in labels}) > 1:
        raise ValueError(f"the labels of {path.name} mix strings and integers ({labels[0]!r}, ...): use one kind")
    return LabelledFile(path.name, list(texts), list(labels))


def _read_rows(path: Path) -> Any:
    """The file as a ``datasets.Dataset`` (in memory), with ``datasets``' errors said in one line."""
    import datasets

    if path.suffix.lower() not in READERS:
        raise ValueError(f"{path}: labelled data must be a .jsonl, .json or .csv file")
    check_input_file(path, "labelled data file")
    try:
        with quiet_datasets():
            rows = getattr(datasets.Dataset, READERS[path.suffix.lower()])(str(path), keep_in_memory=True)
    except (StopIteration, datasets.exceptions.DatasetGenerationError, ValueError) as err:
        if isinstance(err, StopIteration) or "no data" in str(err):  # an empty file, a header or blank lines only
            raise ValueError(f"{path} holds no labelled examples") from None
        cause = err.__cause__ or err.__context__ or err  # the parser's error, which datasets wraps
        raise ValueError(f"{path} does not read as {path.suffix.lower()[1:].upper()}: "
                         f"{str(cause).splitlines()[0] if str(cause) else type(cause).__name__}") from None
    if len(rows) == 0:
        raise ValueError(f"{path} holds no labelled examples")
    return rows


@contextlib.contextmanager
def quiet_datasets() -> Iterator[None]:
    """No progress bar for reading one small file, and no log line before a parser error (the caller says it)."""
    import datasets
    from datasets.utils import are_progress_bars_disabled

    level, bars_off = datasets.logging.get_verbosity(), are_progress_bars_disabled()
    datasets.logging.set_verbosity(logging.CRITICAL)
    datasets.disable_progress_bars()
    try:
        yield
    finally:
        datasets.logging.set_verbosity(level)
        if not bars_off:
            datasets.enable_progress_bars()


def hold_out(labels: np.ndarray, share: float) -> tuple[np.ndarray, np.ndarray]:
    """(training indices, validation indices): `share` of each label's examples held out, at least one of every
    label that has two or more, chosen by a fixed seed (the same examples in every run)."""
    rng = np.random.default_rng(HOLD_OUT_SEED)
    held: list[np.ndarray] = []
    for label in np.unique(labels):
        members = rng.permutation(np.flatnonzero(labels == label))
        count = min(max(round(share * len(members)), 1), len(members) - 1)
        held.append(members[:count])
    validation = np.sort(np.concatenate(held))
    return np.setdiff1d(np.arange(len(labels)), validation), validation


def majority_accuracy(train_labels: np.ndarray, validation_labels: np.ndarray) -> float:
    """Accuracy on the validation labels of always answering the training set's most common label."""
    majority = Counter(train_labels.tolist()).most_common(1)[0][0]
    return float(np.mean(validation_labels == majority))
