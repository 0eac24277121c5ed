"""Run checkpoints (training/state.py): `--resume` continues only the run that was started, with one line otherwise."""

from __future__ import annotations

import pytest

from tiny_runs import TINY_MODEL, byte_data, tiny_config, write_byte_dataset  # noqa: F401
from tinylm_hf.training import train

MASK = "<|mask|>"


@pytest.fixture()
def half_run(byte_data, tmp_path):
    out = tmp_path / "run"
    train(tiny_config(byte_data, out, max_iters=4, eval_every=0))
    return out


@pytest.mark.parametrize(("change", "named"), [
    pytest.param({"model": {**TINY_MODEL, "hidden_size": 32}}, "hidden_size 16 -> 32", id="wider"),
    pytest.param({"model": {**TINY_MODEL, "num_hidden_layers": 3}}, "num_hidden_layers 2 -> 3", id="deeper"),
    pytest.param({"context_length": 32}, "max_position_embeddings 16 -> 32", id="longer-context"),
])
def test_resume_with_another_model_size_is_refused_naming_the_change(byte_data, half_run, change, named):
    with pytest.raises(ValueError, match=f"another model \\({named}\\)"):
        train(tiny_config(byte_data, half_run, max_iters=8, resume=True, **change))


def test_resume_with_another_objective_is_refused(tmp_path):
    data = write_byte_dataset(tmp_path / "data", n_bytes=20_000, extra_special_tokens=(MASK,))
    train(tiny_config(data, tmp_path / "run", max_iters=4, eval_every=0))
    with pytest.raises(ValueError, match="started with objective clm, not mlm: resume with --objective clm"):
        train(tiny_config(data, tmp_path / "run", max_iters=8, resume=True, objective="mlm"))


def test_resume_with_the_same_model_continues(byte_data, half_run):
    assert train(tiny_config(byte_data, half_run, max_iters=8, resume=True)).iterations == 8


def test_resume_with_another_optimizer_is_refused(byte_data, half_run):
    with pytest.raises(ValueError, match="trained with optimizer adamw, not muon: resume with --optimizer adamw"):
        train(tiny_config(byte_data, half_run, max_iters=8, resume=True, optimizer="muon"))


def _run_files(out):
    return {p.relative_to(out): p.stat().st_mtime_ns for p in out.rglob("*") if p.is_file() and p.name != ".lock"}


def test_resume_after_the_data_was_prepared_again_from_another_corpus_is_refused(tmp_path):
    # the run continued silently, and its card and summary named only the new data
    data = write_byte_dataset(tmp_path / "data", n_bytes=20_000)
    train(tiny_config(data, tmp_path / "run", max_iters=4, eval_every=0))
    before = _run_files(tmp_path / "run")
    write_byte_dataset(tmp_path / "data", n_bytes=30_000)  # same tokenizer, same file names, other text
    with pytest.raises(ValueError, match="changed since the run .* started .*pass --overwrite to start afresh"):
        train(tiny_config(data, tmp_path / "run", max_iters=8, resume=True))
    assert _run_files(tmp_path / "run") == before  # nothing written is lost or changed


def test_resume_on_the_same_data_prepared_again_continues(tmp_path):
    data = write_byte_dataset(tmp_path / "data", n_bytes=20_000)
    train(tiny_config(data, tmp_path / "run", max_iters=4, eval_every=0))
    write_byte_dataset(tmp_path / "data", n_bytes=20_000)  # the same tokens, written again
    assert train(tiny_config(data, tmp_path / "run", max_iters=8, resume=True)).iterations == 8


def test_the_cli_refuses_a_resume_on_other_data_with_one_line_and_exit_2(tmp_path, capsys):
    import json

    from conftest import run_cli_error

    data = write_byte_dataset(tmp_path / "data", n_bytes=20_000)
    config = tiny_config(data, tmp_path / "run", max_iters=4, eval_every=0)
    train(config)
    write_byte_dataset(tmp_path / "data", n_bytes=30_000)
    (tmp_path / "cfg.json").write_text(json.dumps({**config.to_dict(), "max_iters": 8}))
    message = run_cli_error(["train", "--config", str(tmp_path / "cfg.json"), "--resume"], capsys)
    assert "changed since the run" in message and "--overwrite" in message
