"""Run checkpoints (training/run/state.py): `--resume` continues only the run that was started, with one line otherwise."""

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


@pytest.mark.parametrize(("optimizer", "change", "group_key", "expected"), [
    pytest.param("adamw", {"weight_decay": 0.05}, "weight_decay", 0.05, id="adamw-weight-decay"),
    pytest.param("adamw", {"beta2": 0.99}, "betas", (0.9, 0.99), id="adamw-betas"),
    pytest.param("muon", {"muon_lr": 0.01}, "lr_scale", 0.01 / 3e-3, id="muon-lr"),
    pytest.param("muon", {"muon_momentum": 0.9}, "momentum", 0.9, id="muon-momentum"),
])
def test_resume_trains_with_the_changed_hyper_parameters_and_records_the_change(byte_data, tmp_path, monkeypatch,
                                                                                optimizer, change, group_key, expected):
    # load_state_dict restored the saved param_groups: the run trained on with the old values while its summary and
    # card stated the new ones
    import json

    from tinylm_hf.training import optimizer as adamw_module
    from tinylm_hf.training import muon as muon_module

    out = tmp_path / "run"
    train(tiny_config(byte_data, out, max_iters=4, eval_every=0, optimizer=optimizer))
    used = []
    for module, name in ((adamw_module, "AdamW"), (muon_module, "MuonWithAdamW")):
        original = getattr(module, name).step

        def spy(self, *args, _original=original, **kwargs):
            used.append([{k: v for k, v in g.items() if k != "params"} for g in self.param_groups])
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(getattr(module, name), "step", spy)
    summary = train(tiny_config(byte_data, out, max_iters=6, eval_every=0, optimizer=optimizer, resume=True, **change))
    name, after = next(iter(change.items()))
    decayed = [g for g in used[0] if g.get("weight_decay") or group_key != "weight_decay"]
    kind = [g for g in decayed if g.get("use_muon", True) or group_key not in ("lr_scale", "momentum")]
    assert kind and all(g[group_key] == pytest.approx(expected) for g in kind)
    before = tiny_config(byte_data, out).to_dict()[name]
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    changed = [r for r in records if "changed" in r]
    assert len(changed) == 1 and changed[0]["iter"] == 4 and changed[0]["changed"][name] == [before, after]
    assert len(summary.setting_changes) == 1 and summary.setting_changes[0].startswith("at step 4 ")
    assert f"{name} {before} -> {after}" in summary.setting_changes[0]
