"""A new user's first run on text of their own (tiny Shakespeare), every step through the `tinylm` CLI."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from conftest import run_cli_error, shared_file
from tinylm_hf.cli import main

TINY_MODEL = '{"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 2}'


def snapshot(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()} | {"modes": str([p.stat().st_mode for p in sorted(folder.rglob("*"))])}


def test_newcomer_path_on_tiny_shakespeare(tmp_path, capsys, monkeypatch):
    text = shared_file("tiny_shakespeare.txt")
    monkeypatch.chdir(tmp_path)
    assert main(["train-tokenizer", "--input", str(text), "--vocab-size", "512", "--out", "tok", "--no-progress"]) == 0
    assert main(["prepare", "--tokenizer", "tok", "--input", str(text), "--out", "data", "--num-proc", "1"]) == 0
    said = capsys.readouterr().out
    assert "cut at blank lines" in said and "validation: the last 5% of the text, by size" in said

    train = ["train", "--data-dir", "data", "--out-dir", "run", "--model", TINY_MODEL, "--batch-size", "4",
             "--context-length", "32", "--warmup-iters", "2", "--eval-every", "3", "--eval-iters", "2",
             "--checkpoint-every", "3", "--threads", "1", "--sample-prompt", "ROMEO:"]
    assert main([*train, "--max-iters", "3"]) == 0
    assert "sample: " in capsys.readouterr().out
    assert "already holds a run" in run_cli_error([*train, "--max-iters", "3"], capsys)
    assert main([*train, "--max-iters", "6", "--resume"]) == 0
    assert "resumed from" in capsys.readouterr().out

    assert main(["generate", "run/hf", "--prompt", "ROMEO:", "--max-new-tokens", "8", "--temperature", "0"]) == 0
    assert capsys.readouterr().out.startswith("ROMEO:")
    Path("heldout.txt").write_text(text.read_text(encoding="utf-8")[-3000:], encoding="utf-8")
    assert main(["eval", "run/hf", "--input", "heldout.txt", "--batch-size", "8"]) == 0
    said = capsys.readouterr()
    assert "bits_per_byte" in said.out and "does not give the text back" not in said.err  # byte-level BPE is lossless

    before = snapshot(tmp_path / "run" / "hf")
    assert main(["push", "run/hf", "--repo-id", "newcomer/shakespeare-tiny", "--dry-run"]) == 0
    assert "Would upload" in capsys.readouterr().out
    assert snapshot(tmp_path / "run" / "hf") == before  # a dry run changes nothing on disk

    card = (tmp_path / "run" / "hf" / "README.md").read_text(encoding="utf-8")
    assert "tiny_shakespeare.txt" in card and "TinyStories" not in card and "children" not in card
    assert "Licence of the data: unknown." in card
    assert "- trained context: 32 tokens" in card and "- optimizer steps: 6" in card
    assert str(tmp_path) not in card and str(text.parent) not in card


def test_newcomer_path_with_a_wordpiece_tokenizer(tmp_path, capsys, monkeypatch):
    """A BERT-style vocabulary has no eos token: documents end with [SEP], which the model then stops at."""
    text = shared_file("tiny_shakespeare.txt")
    monkeypatch.chdir(tmp_path)
    Path("small.txt").write_text(text.read_text(encoding="utf-8")[:60_000], encoding="utf-8")
    assert main(["train-tokenizer", "--algorithm", "wordpiece", "--input", "small.txt", "--vocab-size", "400",
                 "--out", "tok", "--no-progress"]) == 0
    said = capsys.readouterr().out
    written = said.rstrip().split(": ", 1)[1].split(", ")  # the files actually written
    assert {"tokenizer.json", "tokenizer_config.json", "vocab.txt"} <= set(written)
    assert sorted(written) == sorted(p.name for p in (tmp_path / "tok").iterdir())
    assert main(["prepare", "--tokenizer", "tok", "--input", "small.txt", "--out", "data", "--num-proc", "1"]) == 0
    sep = (tmp_path / "tok" / "vocab.txt").read_text(encoding="utf-8").splitlines().index("[SEP]")
    assert json.loads(Path("data/train.json").read_text(encoding="utf-8"))["eos_id"] == sep
    assert main(["train", "--data-dir", "data", "--out-dir", "run", "--model", TINY_MODEL, "--batch-size", "4",
                 "--context-length", "32", "--max-iters", "2", "--warmup-iters", "1", "--eval-every", "2",
                 "--eval-iters", "1", "--threads", "1"]) == 0
    assert json.loads(Path("run/hf/config.json").read_text(encoding="utf-8"))["eos_token_id"] == sep
    capsys.readouterr()
    assert main(["generate", "run/hf", "--prompt", "ROMEO:", "--max-new-tokens", "4", "--temperature", "0"]) == 0
    assert main(["eval", "run/hf", "--input", "small.txt", "--batch-size", "8"]) == 0
    said = capsys.readouterr()
    assert "bits_per_byte" in said.out
    assert "does not give the text back exactly" in said.err  # WordPiece drops whitespace: bits/byte do not compare


def test_a_mistyped_model_folder_is_named_in_the_error(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert "model folder runs/exp1/hf does not exist" in run_cli_error(
        ["generate", "runs/exp1/hf", "--prompt", "x"], capsys)
    (tmp_path / "run" / "hf").mkdir(parents=True)
    (tmp_path / "run" / "hf" / "config.json").write_text("{}", encoding="utf-8")
    assert "a run's model folder is run/hf" in run_cli_error(["generate", "run", "--prompt", "x"], capsys)
