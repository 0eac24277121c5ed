"""Model folders (publish/folder.py): a classifier folder is never used as a language model."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import PACKAGE_DATA, run_cli_error
from tiny_folders import make_tiny_folder


@pytest.fixture(scope="module")
def classifier(tmp_path_factory) -> Path:
    """A `tinylm finetune`-style folder: TinyLMForSequenceClassification (no lm_head saved) and its tokenizer."""
    from transformers import AutoTokenizer

    from tinylm_hf import TinyLMForSequenceClassification

    root = tmp_path_factory.mktemp("heads")
    lm = make_tiny_folder(root / "lm")
    TinyLMForSequenceClassification.from_pretrained(lm, num_labels=2).save_pretrained(root / "cls")
    AutoTokenizer.from_pretrained(lm).save_pretrained(root / "cls")
    return root / "cls"


def _commands(classifier: Path, tmp_path: Path) -> dict[str, list[str]]:
    from tiny_runs import write_byte_dataset

    text = tmp_path / "t.txt"
    text.write_text("Once upon a time there was a cat.\n", encoding="utf-8")
    return {
        "generate": ["generate", str(classifier), "--prompt", "Once", "--max-new-tokens", "2"],
        "eval": ["eval", str(classifier), "--input", str(text)],
        "chat": ["chat", str(classifier)],
        "sft": ["sft", "--init-from", str(classifier), "--data", str(PACKAGE_DATA / "tinystories_chats_valid.jsonl"),
                "--out-dir", str(tmp_path / "run"), "--max-iters", "1", "--warmup-iters", "1"],
        "train": ["train", "--data-dir", str(write_byte_dataset(tmp_path / "data", n_bytes=5_000)), "--init-from",
                  str(classifier), "--out-dir", str(tmp_path / "run"), "--max-iters", "1", "--warmup-iters", "1"],
    }


@pytest.mark.parametrize("command", ["generate", "eval", "chat", "sft", "train"])
def test_a_classifier_folder_is_refused_as_a_language_model(classifier, tmp_path, capsys, command):
    # each exited 0 with the never-saved lm_head drawn at random
    message = run_cli_error(_commands(classifier, tmp_path)[command], capsys)
    assert "TinyLMForSequenceClassification, a classification head" in message
    assert "language-model head was never saved" in message
    assert not (tmp_path / "run").exists()  # refused before anything was written


def test_a_classifier_is_still_fine_tuned_again_as_a_classifier(classifier):
    from tinylm_hf.training.config import TrainConfig
    from tinylm_hf.training.loop import check_init_from_model

    check_init_from_model(TrainConfig(objective="seq_cls", init_from=str(classifier), train_file="x.jsonl"))


def test_export_gguf_refuses_the_head_with_the_same_check(classifier, tmp_path, capsys):
    message = run_cli_error(["export-gguf", str(classifier), str(tmp_path / "m.gguf")], capsys)
    assert "classification head (a task head)" in message and "export-llama" in message
    assert not (tmp_path / "m.gguf").exists()


def test_a_classifier_folder_is_still_pushed_checked_with_its_own_head(classifier, capsys):
    from tinylm_hf.cli import main

    assert main(["push", str(classifier), "--repo-id", "someone/classifier", "--dry-run"]) == 0
