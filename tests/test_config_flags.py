"""commands/config_flags.py: the training commands' flags and --config file, mapped to one TrainConfig; a setting
of an objective the run does not train is refused naming the flag (or file key) and its objective."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import run_cli_error


@pytest.mark.parametrize(("argv", "flag", "owner"), [
    pytest.param(["train", "--data-dir", "d", "--masking", "span", "--mlm-probability", "0.4"], "--masking", "mlm",
                 id="train-clm-masking"),
    pytest.param(["train", "--data-dir", "d", "--mlm-probability", "0.15"], "--mlm-probability", "mlm",
                 id="train-clm-default-value-given"),
    pytest.param(["train", "--data-dir", "d", "--objective", "mlm", "--conversations", "c.jsonl"], "--conversations",
                 "sft", id="train-mlm-conversations"),
    pytest.param(["train", "--data-dir", "d", "--dpo-beta", "0.5"], "--dpo-beta", "dpo", id="train-dpo-beta"),
    pytest.param(["sft", "--data", "c.jsonl", "--init-from", "m", "--masking", "span"], "--masking", "mlm",
                 id="sft-masking"),
    pytest.param(["sft", "--data", "c.jsonl", "--init-from", "m", "--label-names", "a,b"], "--label-names", "seq_cls",
                 id="sft-label-names"),
    pytest.param(["dpo", "--data", "p.jsonl", "--init-from", "m", "--val-conversations", "v.jsonl"],
                 "--val-conversations", "sft", id="dpo-val-conversations"),
    pytest.param(["finetune", "--data", "l.jsonl", "--init-from", "m", "--mlm-probability", "0.3"], "--mlm-probability",
                 "mlm", id="finetune-mlm-probability"),
    pytest.param(["finetune", "--data", "l.jsonl", "--init-from", "m", "--preferences", "p.jsonl"], "--preferences",
                 "dpo", id="finetune-preferences"),
])
def test_a_flag_of_another_objective_is_refused(argv: list[str], flag: str, owner: str,
                                                capsys: pytest.CaptureFixture) -> None:
    err = run_cli_error(argv, capsys)
    assert f"{flag} is a setting of objective {owner}" in err


@pytest.mark.parametrize("command", ["train", "sft", "dpo", "finetune"])
def test_a_config_file_key_of_another_objective_is_refused(command: str, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture) -> None:
    config = tmp_path / "run.yaml"
    key = "conversations" if command != "sft" else "masking"
    config.write_text(f"{key}: x\n", encoding="utf-8")
    err = run_cli_error([command, "--config", str(config)], capsys)
    assert f"{key} (in {config}) is a setting of objective" in err


def test_a_saved_config_of_every_field_at_its_default_is_taken(tmp_path: Path) -> None:
    """A config written whole (`TrainConfig.to_dict()`, the quickstart's train_config.json) holds every objective's
    fields at their defaults: they were not set, so they are not refused."""
    import json

    from tinylm_hf.cli import build_parser
    from tinylm_hf.commands.config_flags import config_from_args
    from tinylm_hf.training.config import TrainConfig

    (tmp_path / "run.json").write_text(json.dumps(TrainConfig(data_dir="d", max_iters=800).to_dict()), encoding="utf-8")
    args = build_parser(with_flags=["train"]).parse_args(["train", "--config", str(tmp_path / "run.json")])
    assert config_from_args(args).max_iters == 800


def test_a_config_file_objective_a_command_overrides_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    config = tmp_path / "run.yaml"
    config.write_text("objective: mlm\n", encoding="utf-8")
    err = run_cli_error(["sft", "--config", str(config)], capsys)
    assert f"config file {config} sets objective 'mlm', but this command trains objective sft" in err


def test_the_flags_of_the_run_objective_are_taken() -> None:
    from tinylm_hf.cli import build_parser
    from tinylm_hf.commands.config_flags import config_from_args

    args = build_parser(with_flags=["train"]).parse_args(
        ["train", "--data-dir", "d", "--objective", "mlm", "--masking", "span", "--mlm-probability", "0.4"])
    config = config_from_args(args)
    assert (config.objective, config.masking, config.mlm_probability) == ("mlm", "span", 0.4)


def test_another_objectives_flags_stay_out_of_help(capsys: pytest.CaptureFixture) -> None:
    from tinylm_hf.cli import build_parser

    with pytest.raises(SystemExit):
        build_parser(with_flags=["sft"]).parse_args(["sft", "--help"])
    text = capsys.readouterr().out
    assert "--mlm-probability" not in text and "--preferences" not in text and "SUPPRESS" not in text
