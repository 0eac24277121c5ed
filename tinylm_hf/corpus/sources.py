"""Where training text comes from: files named by paths or globs, and `datasets` datasets streamed by name."""

from __future__ import annotations

import glob
import os
from collections.abc import Iterator, Sequence
from pathlib import Path

PACKAGE_DATA = Path(__file__).resolve().parent.parent / "data"  # the text and conversations bundled with tinylm_hf


def expand_inputs(patterns: Sequence[str | os.PathLike]) -> list[Path]:
    """Files named by paths or glob patterns (`data/*.txt`), in order, each once; a pattern that matches
    nothing is a FileNotFoundError naming it."""
    files: list[Path] = []
    for pattern in patterns:
        pattern = os.fspath(pattern)
        matches = sorted(glob.glob(pattern, recursive=True)) if glob.has_magic(pattern) else [pattern]
        if not glob.has_magic(pattern) and os.path.isdir(pattern):
            raise IsADirectoryError(f"input {pattern} is a directory, not a file: name its files, e.g. {pattern}/*.txt")
        matches = [m for m in matches if os.path.isfile(m)]
        if not matches:
            raise FileNotFoundError(f"no input file matches {pattern}")
        files += [Path(m) for m in matches if Path(m) not in files]
    return files


def iter_dataset_texts(spec: str, text_column: str = "text") -> Iterator[str]:
    """Stream the texts of a `datasets` dataset given as NAME or NAME:SPLIT (default split: train).

    Streaming reads as it goes, so memory stays bounded whatever the dataset's size.
    """
    from datasets import load_dataset

    name, _, split = spec.partition(":")
    dataset = load_dataset(name, split=split or "train", streaming=True)
    first = True
    for row in dataset:
        if first and text_column not in row:
            raise ValueError(f"dataset {name} has no column {text_column!r} (columns: {sorted(row)}); pass --text-column")
        first = False
        text = row[text_column]
        if isinstance(text, str) and text:
            yield text
