"""The corpus-source task: a small labelled dataset bundled with the package (no Hub needed).

Each example is a passage of ``PASSAGE_WORDS`` consecutive words (whitespace collapsed to single spaces)
cut from one of three corpora, and its label says which: TinyStories (children's stories written by
GPT-3.5/4), Shakespeare's plays, or a 19th-century novel. The labels are true by construction. The
splits never share a source text: TinyStories train comes from the training slice and validation/test
from the validation slice, Shakespeare's plays are cut 80/10/10 in order, and the novels are split by
book. ``scripts/build_corpus_source_task.py`` rebuilds the files from ``../shared/data``, byte for byte.
Licences: tinylm_hf/data/NOTICE.md (the TinyStories passages stay under CDLA-Sharing-1.0).

>>> load_corpus_source_task("test").features["label"].names
['tinystories', 'shakespeare', 'novel']
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .sources import PACKAGE_DATA as DATA_DIR  # the package's bundled data folder

SOURCE_LABELS = ("tinystories", "shakespeare", "novel")  # label id -> name
SPLITS = ("train", "validation", "test")
PASSAGE_WORDS = 32
PER_LABEL = {"train": 200, "validation": 50, "test": 50}  # passages of each label in each split


def source_task_path(split: str, data_dir: Path = DATA_DIR) -> Path:
    """The JSON-lines file of one split (``{"text": ..., "label": id}`` per line)."""
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r} of the corpus-source task; choose one of {', '.join(SPLITS)}")
    return data_dir / f"corpus_source_{split}.jsonl"


def load_corpus_source_task(split: str | None = None) -> Any:
    """The task as a ``datasets.Dataset`` (one split) or ``DatasetDict`` (all three, ``split=None``).

    Columns: ``text`` (str) and ``label`` (a ``ClassLabel`` named by ``SOURCE_LABELS``).
    """
    from datasets import ClassLabel, Dataset, DatasetDict, Features, Value

    features = Features({"text": Value("string"), "label": ClassLabel(names=list(SOURCE_LABELS))})
    if split is None:
        return DatasetDict({name: load_corpus_source_task(name) for name in SPLITS})
    lines = source_task_path(split).read_text(encoding="utf-8").splitlines()
    return Dataset.from_list([json.loads(line) for line in lines], features=features)
