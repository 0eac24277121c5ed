"""The bundled corpus-source task: sizes, balance, true labels, separate splits, and a byte-identical rebuild."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from conftest import PACKAGE_DATA, REPO_ROOT, shared_file
from tinylm_hf import load_corpus_source_task
from tinylm_hf.corpus.source_task import PASSAGE_WORDS, PER_LABEL, SOURCE_LABELS, SPLITS, source_task_path

pytestmark = pytest.mark.contract  # reads through datasets (.ci/run)


@pytest.fixture(scope="module")
def task():
    return load_corpus_source_task()


def collapsed(path: Path) -> str:
    """A corpus file with every run of whitespace made one space, as the passages are."""
    return " ".join(path.read_text(encoding="utf-8").split())


def test_each_split_has_its_passages_of_every_label(task) -> None:
    assert list(task) == list(SPLITS)
    assert task["train"].features["label"].names == list(SOURCE_LABELS)
    for split in SPLITS:
        assert Counter(task[split]["label"]) == {label: PER_LABEL[split] for label in range(len(SOURCE_LABELS))}
        assert all(len(text.split()) == PASSAGE_WORDS for text in task[split]["text"])


def test_no_passage_is_in_two_splits_or_twice_in_one(task) -> None:
    texts = [text for split in SPLITS for text in task[split]["text"]]
    assert len(set(texts)) == len(texts)


def test_tinystories_labels_are_true(task) -> None:
    """The bundled TinyStories slices hold every passage labelled tinystories, and no other."""
    slices = ("tinystories_train_small.txt", "tinystories_valid_small.txt")
    stories = " ".join(collapsed(PACKAGE_DATA / name) for name in slices)
    for split in SPLITS:
        for row in task[split]:
            assert (row["text"] in stories) == (row["label"] == 0), (split, row)


def test_shakespeare_labels_are_true(task) -> None:
    plays = collapsed(shared_file("tiny_shakespeare.txt"))
    for split in SPLITS:
        for row in task[split]:
            assert (row["text"] in plays) == (row["label"] == 1), (split, row)


def test_an_unknown_split_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown split 'dev'.*train, validation, test"):
        load_corpus_source_task("dev")


@pytest.mark.slow  # reads the 40 MB novels file: ~15 s
def test_the_script_rebuilds_the_files_byte_for_byte(tmp_path: Path) -> None:
    shared = shared_file("pd_novels_heldout.txt").parent
    script = REPO_ROOT / "scripts" / "build_corpus_source_task.py"
    subprocess.run([sys.executable, str(script), "--shared-data", str(shared), "--out", str(tmp_path)],
                   check=True, capture_output=True, timeout=600)
    for split in SPLITS:
        assert source_task_path(split, tmp_path).read_bytes() == source_task_path(split).read_bytes(), split
