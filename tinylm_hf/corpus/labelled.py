"""Labelled text files for fine-tuning a classifier: read a text and a label column, name the labels, hold out a
validation share.

A file is JSON lines (``.jsonl``), JSON (``.json``, a list of objects) or CSV (``.csv``), read as UTF-8 by the rule
of `sources` and taken as the file spells it: a JSON value keeps its JSON type; a CSV cell is its string (``NA``,
``None`` and ``01`` stay those strings), and a CSV column of plain integers (``0``, ``12``) reads as integers. Labels are all
strings or all integers: string labels are named by themselves and numbered in sorted order; integer labels are
numbered in sorted order and named by their digits, unless ``label_names`` names ids 0, 1, 2, ... (then an
integer label is its own id). Every problem is a ``ValueError`` (``FileNotFoundError`` for a missing file)
naming the file, the row or the column, and what to change.
"""

from __future__ import annotations

import csv
import io
import os
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .sources import iter_lines, parse_json_text, read_text

HOLD_OUT_SEED = 0  # the held-out validation examples are the same in every run of a file and share
_PLAIN_INTEGER = re.compile(r"-?(0|[1-9][0-9]*)")


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
        if column not in rows:
            raise ValueError(f"{path.name} has no column {column!r} (its columns: {', '.join(rows)}); "
                             f"name the right one with {flag}")
    texts, labels = rows[text_column], rows[label_column]
    for row, (text, label) in enumerate(zip(texts, labels), start=1):
        if not isinstance(text, str) or not text.strip():
            raise ValueError(f"row {row} of {path.name} has no text in column {text_column!r} (got {text!r})")
        if label is None or label == "":
            raise ValueError(f"row {row} of {path.name} has label {label!r} in column {label_column!r}: give every "
                             "row a label")
        if isinstance(label, (float, bool)) or not isinstance(label, (str, int)):
            raise ValueError(f"row {row} of {path.name} has label {label!r} in column {label_column!r}: labels must "
                             "be strings or integers (a class, not a number to regress)")
    if len({type(label) for label in labels}) > 1:
        raise ValueError(f"the labels of {path.name} mix strings and integers ({labels[0]!r}, ...): use one kind")
    return LabelledFile(path.name, list(texts), list(labels))


def _read_rows(path: Path) -> dict[str, list[Any]]:
    """The file's columns (name -> values, None where a JSON row lacks the key), read as the file holds them: CSV
    cells are the strings they spell (never NA/None/NaN guessed, `01` never `1`), JSON values their JSON types."""
    if path.suffix.lower() not in READERS:
        raise ValueError(f"{path}: labelled data must be a .jsonl, .json or .csv file")
    records = READERS[path.suffix.lower()](path)
    if not records:
        raise ValueError(f"{path} holds no labelled examples")
    columns = list(dict.fromkeys(key for record in records for key in record))
    return {column: [record.get(column) for record in records] for column in columns}


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    records = []
    for number, line in iter_lines(path, "labelled data file"):
        if line.strip():
            records.append(_json_record(line, path, f"line {number}", "JSONL"))
    return records


def _read_json(path: Path) -> list[dict[str, Any]]:
    text = read_text(path, "labelled data file")
    if not text.strip():
        return []
    body = _json_record(text, path, "its text", "JSON", record=False)
    if not isinstance(body, list) or not all(isinstance(row, dict) for row in body):
        raise ValueError(f"{path} does not read as JSON: expected a list of objects, one per example")
    return body


def _json_record(text: str, path: Path, where: str, kind: str, *, record: bool = True) -> Any:
    value = parse_json_text(text, f"{path}, {where}")
    if record and not isinstance(value, dict):
        raise ValueError(f"{path} does not read as {kind}: {where} is not an object")
    return value


def _read_csv(path: Path) -> list[dict[str, Any]]:
    text = io.StringIO(read_text(path, "labelled data file"), newline="")
    try:
        rows = [row for row in csv.reader(text) if row]
    except csv.Error as err:
        raise ValueError(f"{path} does not read as CSV: {err}") from None
    if len(rows) < 2:
        return []
    header, records = rows[0], []
    for number, row in enumerate(rows[1:], start=1):
        if len(row) != len(header):
            raise ValueError(f"row {number} of {path.name} has {len(row)} cells where the header names {len(header)} "
                             f"({', '.join(header)}): quote cells that hold commas")
        records.append(dict(zip(header, row)))
    return _integer_columns(records, header)


def _integer_columns(records: list[dict[str, Any]], header: list[str]) -> list[dict[str, Any]]:
    """CSV rows whose columns spell only plain integers (`0`, `12`, `-3`; never `01` or `+1`) read as integers, so
    integer labels name ids as in JSON; any other column keeps its strings."""
    for column in header:
        if all(_PLAIN_INTEGER.fullmatch(record[column]) for record in records):
            for record in records:
                record[column] = int(record[column])
    return records


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


READERS = {".jsonl": _read_jsonl, ".json": _read_json, ".csv": _read_csv}  # suffix -> reader of its records
