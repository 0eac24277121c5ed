"""The `tinylm` command line: one-line user errors (exit 2), --debug, and no code run from a folder by default."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from conftest import run_cli_error
from tiny_folders import make_tiny_folder
from tiny_runs import byte_data  # noqa: F401  (a fixture)
from tinylm_hf.cli import main

PAYLOAD = "import pathlib\npathlib.Path({marker!r}).write_text('ran')\n"


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    return make_tiny_folder(tmp_path_factory.mktemp("cli") / "model")


def plant(folder: Path, marker: Path) -> None:
    """Append a payload to every *.py file of a saved folder (what a malicious download would hold)."""
    for path in folder.glob("*.py"):
        path.write_text(path.read_text(encoding="utf-8") + PAYLOAD.format(marker=str(marker)), encoding="utf-8")


@pytest.fixture()
def planted(folder, tmp_path) -> tuple[Path, Path]:
    import shutil

    copy = Path(shutil.copytree(folder, tmp_path / "downloaded"))
    marker = tmp_path / "payload-ran"
    plant(copy, marker)
    return copy, marker


@pytest.mark.parametrize("argv", [
    ["generate", "{dir}", "--prompt", "Once", "--max-new-tokens", "2", "--temperature", "0"],
    ["eval", "{dir}", "--input", "{text}"],
    ["export-llama", "{dir}", "{out}"],
    ["export-gguf", "{dir}", "{out}.gguf"],
    ["push", "{dir}", "--repo-id", "alice/x", "--dry-run"],
], ids=["generate", "eval", "export-llama", "export-gguf", "push"])
def test_a_tinylm_folder_loads_with_installed_code_not_its_own(planted, tmp_path, argv):
    folder, marker = planted
    (tmp_path / "t.txt").write_text("Once upon a time there was a cat.", encoding="utf-8")
    args = [a.format(dir=folder, text=tmp_path / "t.txt", out=tmp_path / "llama") for a in argv]
    assert main(args) == 0
    assert not marker.exists()


def test_foreign_code_runs_only_with_the_flag(planted, tmp_path, capsys):
    folder, marker = planted
    config = json.loads((folder / "config.json").read_text())
    config["model_type"] = "evil"
    (folder / "config.json").write_text(json.dumps(config))
    err = run_cli_error(["generate", str(folder), "--prompt", "Once"], capsys)
    assert "--trust-remote-code" in err and not marker.exists()
    try:  # the foreign model type may not load in the end: what matters is that its code ran
        main(["generate", str(folder), "--prompt", "Once", "--max-new-tokens", "1", "--trust-remote-code"])
    except Exception:
        pass
    assert marker.exists()  # the flag really opts in


@pytest.mark.parametrize("argv, message", [
    (["generate", "{dir}", "--prompt", "Hi", "--temperature", "-1"], "temperature must be a finite number >= 0"),
    (["generate", "{dir}", "--prompt", "Hi", "--temperature", "nan"], "temperature must be a finite number"),
    (["generate", "{dir}", "--prompt", "Hi", "--temperature", "inf"], "temperature must be a finite number"),
    (["generate", "{dir}", "--prompt", "Hi", "--top-p", "1.5"], r"top_p must be in \(0, 1\]"),
    (["generate", "{dir}", "--prompt", "Hi", "--top-p", "0"], r"top_p must be in \(0, 1\]"),
    (["eval", "{dir}", "--input", "{text}", "--limit", "-1"], "limit must be a positive number"),
    (["eval", "{dir}", "--input", "{text}", "--context-length", "100000"], "context-length must be in"),
    (["train-tokenizer", "--input", "{text}", "--vocab-size", "300", "--out", "{text}"], "is a file, not a folder"),
    (["quickstart", "--time-budget-s", "-5", "--out", "{out}"], "budget must be a positive number"),
    (["train", "--data-dir", "{parent}", "--optimizer", "sgd"], "optimizer must be one of adamw, muon"),
    (["train", "--data-dir", "{parent}", "--optimizer", "muon", "--muon-momentum", "1"], "muon_momentum < 1"),
    (["push", "{dir}", "--repo-id", "a/b.git"], "not a valid 'owner/name' Hub id"),
    (["export-llama", "{dir}", "{parent}", "--overwrite"], "contains the input folder"),
    (["export-gguf", "{dir}", "{text}"], "already exists .*--overwrite"),
    (["export-gguf", "{dir}", "{dir}/model.safetensors", "--overwrite"], "is one of the inputs"),
    (["count-words", "--input", "{text}", "--out", "{text}"], "is one of the inputs"),
    (["eval", "{dir}", "--input", "{text}", "--out", "{text}"], "is one of the inputs"),
    (["eval", "{dir}", "--input", "{text}", "--out", "{dir}/config.json"], "is one of the inputs"),
    (["prepare", "--tokenizer", "{dir}", "--input", "{parent}", "--out", "{out}"], "is a directory, not a file"),
    (["count-words", "--input", "{parent}", "--out", "{out}.json"], "is a directory, not a file"),
    (["eval", "{dir}", "--input", "{parent}"], "is a directory, not a file"),
    (["generate", "{text}", "--prompt", "Hi"], "is a file, not a folder"),
    (["prepare", "--tokenizer", "{text}", "--input", "{text}", "--out", "{out}"], "is a file, not a folder"),
    (["generate", "{dir}", "--prompt", "Hi", "--seed", str(2**70)], r"--seed must be a whole number from 0 to 2\*\*63 - 1"),
    (["generate", "{dir}", "--prompt", "Hi", "--seed", "-1"], r"--seed must be a whole number from 0"),
    (["prepare", "--tokenizer", "{dir}", "--input", "{text}", "--out", "{out}", "--mlm-static", "--mlm-seed",
      str(2**70)], "mlm_seed must be a whole number"),
    (["generate", "{dir}", "--prompt", "caf\udce9"], "--prompt holds the byte 0xE9, which is not UTF-8"),
    (["generate", "{dir}", "--prompt=caf\udce9"], "--prompt holds the byte 0xE9, which is not UTF-8"),
    (["generate", "{dir}\udce9", "--prompt", "Hi"], "an argument holds the byte 0xE9, which is not UTF-8"),
], ids=lambda v: v if isinstance(v, str) else " ".join(v[:2]))
def test_user_errors_are_one_line_and_exit_2(folder, tmp_path, capsys, argv, message):
    (tmp_path / "t.txt").write_text("Once upon a time.", encoding="utf-8")
    before = {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}
    args = [a.format(dir=folder, text=tmp_path / "t.txt", out=tmp_path / "qs", parent=folder.parent) for a in argv]
    assert re.search(message, run_cli_error(args, capsys))
    assert {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()} == before  # the inputs kept
    assert (tmp_path / "t.txt").read_text(encoding="utf-8") == "Once upon a time."


@pytest.mark.parametrize("flags, message", [
    (["--eval-iters", "0"], "eval_iters must be an integer >= 1"),
    (["--device", "cuda"], "no CUDA GPU"),
    (["--warmup-iters", "50", "--max-iters", "10"], "warmup_iters .* larger than max_iters"),
    (["--context-length", "4096", "--model", '{"max_position_embeddings": 64}'], "exceeds the model's max_position_embeddings"),
    (["--seed", str(2**70)], r"seed must be a whole number from 0 to 2\*\*63 - 1"),
    (["--sample-prompt", "caf\udce9"], "--sample-prompt holds the byte 0xE9"),
], ids=["eval-iters-0", "cuda-without-gpu", "warmup-over-max", "context-over-model", "seed-2**70", "latin1-prompt"])
def test_train_flag_errors(byte_data, tmp_path, capsys, flags, message, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    args = ["train", "--data-dir", str(byte_data), "--out-dir", str(tmp_path / "run"), "--threads", "1",
            "--model", '{"hidden_size": 16, "intermediate_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2}',
            "--max-iters", "2", "--warmup-iters", "1", "--context-length", "16", "--batch-size", "2", *flags]
    assert re.search(message, run_cli_error(args, capsys))
    assert not (tmp_path / "run" / "checkpoints").exists()


def test_debug_shows_the_traceback(folder):
    with pytest.raises(ValueError, match="temperature"):
        main(["generate", str(folder), "--prompt", "Hi", "--temperature", "-1", "--debug"])


def test_export_llama_overwrite_replaces_only_a_model_folder(folder, tmp_path, capsys):
    """--overwrite once deleted whatever folder (or file) was named; now only an earlier model folder."""
    mine = tmp_path / "notes"
    mine.mkdir()
    (mine / "todo.txt").write_text("keep me")
    err = run_cli_error(["export-llama", str(folder), str(mine), "--overwrite"], capsys)
    assert "is not a model folder" in err and (mine / "todo.txt").read_text() == "keep me"
    assert main(["export-llama", str(folder), str(tmp_path / "llama")]) == 0
    assert main(["export-llama", str(folder), str(tmp_path / "llama"), "--overwrite"]) == 0  # its own output: replaced


def test_a_library_error_of_several_lines_is_printed_as_one(monkeypatch, capsys):
    from tinylm_hf.commands import count_words

    def fails(args):
        raise OSError("the Hub said:\n\n  401 Unauthorized\n")

    monkeypatch.setattr(count_words, "run", fails)
    err = run_cli_error(["count-words", "--input", "x.txt", "--out", "c.json"], capsys)
    assert err == "tinylm count-words: error: the Hub said: 401 Unauthorized (--debug shows the traceback)\n"


@pytest.fixture()
def full_disk(tmp_path):
    """A real 64 KiB tmpfs (needs root to mount one; skipped otherwise), holding a file of the user's."""
    import os
    import subprocess

    small = tmp_path / "small"
    small.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(small)],
                                           capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here")
    (small / "keep.txt").write_text("kept")
    yield small
    subprocess.run(["umount", "-l", str(small)], check=True)  # -l: even if a failed writer left a file open


@pytest.mark.parametrize("argv", [
    ["export-gguf", "{dir}", "{disk}/m.gguf"],
    ["export-llama", "{dir}", "{disk}/llama"],
    ["train-tokenizer", "--input", "{text}", "--vocab-size", "300", "--out", "{disk}/tok", "--no-progress"],
    ["prepare", "--tokenizer", "{dir}", "--input", "{text}", "--out", "{disk}/data/new", "--num-proc", "1"],
], ids=lambda v: v[0])
def test_a_full_disk_says_no_space_left_on_the_folder(folder, full_disk, tmp_path, capsys, argv):
    from conftest import PACKAGE_DATA

    text = PACKAGE_DATA / "tinystories_valid_small.txt"
    err = run_cli_error([a.format(dir=folder, disk=full_disk, text=text) for a in argv], capsys)
    assert "no space left on" in err and str(full_disk) in err and "requested" not in err
    assert sorted(p.name for p in full_disk.iterdir()) == ["keep.txt"] and (full_disk / "keep.txt").read_text() == "kept"


OBJECTIVE_GROUPS = {"clm": None, "mlm": "masked language modelling (objective mlm):",
                    "sft": "chat fine-tuning (objective sft):", "seq_cls": "labelled data (objective seq_cls):",
                    "dpo": "preference pairs (objective dpo):"}


@pytest.mark.parametrize("command,objectives", [("train", ("clm", "mlm")), ("sft", ("sft",)),
                                                ("finetune", ("seq_cls",)), ("dpo", ("dpo",))])
def test_a_training_command_shows_its_objectives_fields_as_their_own_group(capsys, command, objectives):
    with pytest.raises(SystemExit):
        main([command, "--help"])
    groups = [line for line in capsys.readouterr().out.splitlines() if line.endswith(":") and "(objective" in line]
    assert groups == [OBJECTIVE_GROUPS[name] for name in objectives if OBJECTIVE_GROUPS[name]]


def test_a_sigterm_that_arrives_inside_a_finalizer_is_raised_after_it() -> None:
    """Python drops an exception raised in `__del__`: the command would run on as if no SIGTERM had come."""
    import os
    import signal
    import time

    from tinylm_hf.cli import Terminated, raise_on_sigterm

    class Finalized:
        def __del__(self) -> None:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.2)  # the handler runs in here

    previous = raise_on_sigterm()
    try:
        with pytest.raises(Terminated):
            Finalized()
            time.sleep(5)
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_train_ends_with_a_few_lines_and_keeps_every_number_in_summary_json(byte_data, tmp_path, capsys):
    from tinylm_hf.training.run.summary import RunSummary

    out = tmp_path / "run"
    assert main(["train", "--data-dir", str(byte_data), "--out-dir", str(out), "--threads", "1", "--model",
                 '{"hidden_size": 16, "intermediate_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2}',
                 "--max-iters", "2", "--warmup-iters", "1", "--eval-every", "2", "--eval-iters", "1",
                 "--context-length", "16", "--batch-size", "2", "--publish", "none"]) == 0
    said = capsys.readouterr().out.rstrip().splitlines()
    summary = RunSummary.load(out)
    assert said[-3:] == summary.describe().splitlines()
    assert said[-3].startswith("2 steps (64 tokens) in ") and "bits per byte" in said[-2]
    assert said[-1] == f"run folder: {out} (every number in {out / 'summary.json'})"
    assert not [line for line in said if line.lstrip().startswith(("{", '"'))]  # no JSON on the screen


def test_quickstart_names_its_time_budgets_as_train_does_and_takes_the_old_names_with_a_notice(capsys):
    from tinylm_hf.cli import build_parser

    parser = build_parser(with_flags=["quickstart", "train"])
    new = parser.parse_args(["quickstart", "--time-budget-s", "30", "--chat-time-budget-s", "9"])
    assert (new.time_budget_s, new.chat_time_budget_s) == (30, 9)
    assert parser.parse_args(["train", "--time-budget-s", "30"]).time_budget_s == 30  # the same name
    assert capsys.readouterr().err == ""
    old = parser.parse_args(["quickstart", "--time-budget", "30", "--chat-budget", "9"])
    assert (old.time_budget_s, old.chat_time_budget_s) == (30, 9)
    assert capsys.readouterr().err.splitlines() == [
        "tinylm quickstart: --time-budget is now called --time-budget-s (the old name will go)",
        "tinylm quickstart: --chat-budget is now called --chat-time-budget-s (the old name will go)"]
    with pytest.raises(SystemExit):
        parser.parse_args(["quickstart", "--help"])
    shown = capsys.readouterr().out
    assert "--time-budget-s" in shown and "--chat-time-budget-s" in shown
    assert not re.search(r"--(time-budget|train-budget|chat-budget)\b(?!-s)", shown)


# Each command that takes validation data, the arguments it needs besides, and its flag's former names.
VAL_DATA_COMMANDS = {
    "prepare": (["--tokenizer", "tok", "--input", "train.txt", "--out", "data"], ("--val-input",)),
    "sft": ([], ()),
    "dpo": ([], ("--valid-data",)),
    "finetune": ([], ("--validation-data",)),
    "quickstart": ([], ("--val-file",)),
}
OLD_VAL_DATA_FLAGS = [(command, old) for command, (_, olds) in VAL_DATA_COMMANDS.items() for old in olds]


def command_parsers(parser) -> dict:
    """Command name -> its sub-parser."""
    import argparse

    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices


def shown_flags(parser) -> list[str]:
    """The flags `parser --help` lists."""
    import argparse

    return [flag for action in parser._actions if action.help != argparse.SUPPRESS for flag in action.option_strings]


def test_validation_data_has_one_flag_name_across_commands():
    """One concept, one flag: a file of validation data is --val-data in every command; the other validation flags
    are other concepts (prepare carves a fraction of the text by size, finetune holds out a share of each label)."""
    from tinylm_hf.cli import build_parser

    shown = {name: [flag for flag in shown_flags(sub) if re.match(r"--val(id|idation)?\b", flag)]
             for name, sub in command_parsers(build_parser()).items()}
    assert {name: flags for name, flags in shown.items() if flags} == {
        "prepare": ["--val-data", "--val-fraction"], "sft": ["--val-data"], "dpo": ["--val-data"],
        "finetune": ["--val-data", "--validation-share"], "quickstart": ["--val-data"]}


@pytest.mark.parametrize("command, old", OLD_VAL_DATA_FLAGS, ids=[f"{c}{o}" for c, o in OLD_VAL_DATA_FLAGS])
def test_an_old_validation_flag_is_taken_as_val_data_with_a_one_line_notice(command, old, capsys):
    from tinylm_hf.cli import build_parser

    parser = build_parser(with_flags=[command])
    needed = VAL_DATA_COMMANDS[command][0]
    new = parser.parse_args([command, *needed, "--val-data", "valid.jsonl"])
    assert capsys.readouterr().err == ""
    assert parser.parse_args([command, *needed, old, "valid.jsonl"]) == new
    assert capsys.readouterr().err.splitlines() == [
        f"tinylm {command}: {old} is now called --val-data (the old name will go)"]


@pytest.mark.parametrize("command", VAL_DATA_COMMANDS)
def test_help_shows_val_data_and_not_an_old_spelling(command, capsys):
    from tinylm_hf.cli import build_parser

    with pytest.raises(SystemExit):
        build_parser(with_flags=[command]).parse_args([command, "--help"])
    shown = capsys.readouterr().out
    assert "--val-data" in shown
    assert not re.search(r"--(val-input|valid-data|validation-data|val-file)\b", shown)
