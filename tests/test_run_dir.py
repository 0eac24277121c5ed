"""A run's out-dir: one run per folder, resume only that run, one process at a time, no mixed data."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

from conftest import REPO_ROOT
from tiny_runs import byte_data, losses, tiny_config, write_byte_dataset  # noqa: F401  (byte_data is a fixture)
from tinylm_hf.training import train
from tinylm_hf.training.run.checkpoint import list_checkpoints
from tinylm_hf.training.run.folder import RunDirectory, RunInUseError


def test_training_into_a_used_folder_without_resume_refuses(byte_data, tmp_path):
    train(tiny_config(byte_data, tmp_path / "run", max_iters=4))
    before = sorted(p.name for p in (tmp_path / "run" / "checkpoints").iterdir())
    with pytest.raises(FileExistsError, match="--resume.*--overwrite"):
        train(tiny_config(byte_data, tmp_path / "run", max_iters=4))
    assert sorted(p.name for p in (tmp_path / "run" / "checkpoints").iterdir()) == before


def test_overwrite_starts_a_new_run_without_old_checkpoints(byte_data, tmp_path):
    first = train(tiny_config(byte_data, tmp_path / "run", max_iters=8))
    second = train(tiny_config(byte_data, tmp_path / "run", max_iters=4, overwrite=True))
    assert second.run_id != first.run_id
    assert [p.name for p in list_checkpoints(tmp_path / "run" / "checkpoints")] == ["ckpt_00000004.pt"]
    assert max(losses(tmp_path / "run")) == 4


def test_resume_never_picks_a_checkpoint_of_another_run(byte_data, tmp_path):
    train(tiny_config(byte_data, tmp_path / "a", max_iters=8))
    train(tiny_config(byte_data, tmp_path / "b", max_iters=4))
    # a stale checkpoint of run a, newer than b's, lands in b's folder
    (tmp_path / "b" / "checkpoints" / "ckpt_00000008.pt").write_bytes(
        (tmp_path / "a" / "checkpoints" / "ckpt_00000008.pt").read_bytes())
    resumed = train(tiny_config(byte_data, tmp_path / "b", max_iters=6, resume=True))
    assert resumed.iterations == 6  # continued b from 4, not a from 8


def test_resume_falls_back_past_a_truncated_newest_checkpoint(byte_data, tmp_path, capsys):
    train(tiny_config(byte_data, tmp_path / "full", cosine_cycle_iters=12))
    train(tiny_config(byte_data, tmp_path / "cut", cosine_cycle_iters=12, max_iters=8))
    newest = tmp_path / "cut" / "checkpoints" / "ckpt_00000008.pt"
    newest.write_bytes(newest.read_bytes()[: newest.stat().st_size // 2])
    (tmp_path / "cut" / "checkpoints" / ".ckpt_00000009.pt.123.tmp").write_bytes(b"half a write")
    train(tiny_config(byte_data, tmp_path / "cut", cosine_cycle_iters=12, resume=True))
    out = capsys.readouterr().out
    assert "skipped a checkpoint" in out and "truncated or corrupt" in out and "ckpt_00000004.pt" in out
    assert losses(tmp_path / "cut") == losses(tmp_path / "full")
    assert not list((tmp_path / "cut" / "checkpoints").glob("*.tmp"))


def test_resume_on_data_of_another_tokenizer_refuses(byte_data, tmp_path):
    train(tiny_config(byte_data, tmp_path / "run", max_iters=4))
    other = write_byte_dataset(tmp_path / "other")
    for name in ("train.json", "val.json"):
        header = json.loads((other / name).read_text())
        header["tokenizer_fingerprint"] = "0123456789abcdef"
        (other / name).write_text(json.dumps(header))
    with pytest.raises(ValueError, match="another tokenizer"):
        train(tiny_config(other, tmp_path / "run", max_iters=8, resume=True))


def test_a_second_process_on_the_same_folder_is_refused(tmp_path):
    first = RunDirectory(tmp_path / "run")
    first.lock()
    try:
        code = (f"from tinylm_hf.training.run.folder import RunDirectory\n"
                f"RunDirectory({str(tmp_path / 'run')!r}).lock()")
        proc = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True)
        assert proc.returncode != 0 and "RunInUseError" in proc.stderr and f"pid" in proc.stderr
        with pytest.raises(RunInUseError):
            RunDirectory(tmp_path / "run").lock()  # a second handle in this process too
    finally:
        first.unlock()
    RunDirectory(tmp_path / "run").lock()  # free again once released


def test_nan_guard_names_a_finite_checkpoint(byte_data, tmp_path, monkeypatch):
    from tinylm_hf.training import step as step_module

    real = step_module.clip_grad_norm
    calls = {"n": 0}

    def exploding(params, max_norm):
        calls["n"] += 1
        norm = real(params, max_norm)
        return norm * float("inf") if calls["n"] == 7 else norm  # the 7th step's gradients overflow

    monkeypatch.setattr(step_module, "clip_grad_norm", exploding)
    with pytest.raises(step_module.NonFiniteLossError, match=r"gradient norm inf at iteration 7.*ckpt_00000004\.pt"):
        train(tiny_config(byte_data, tmp_path / "run", eval_every=0))
    state = torch.load(tmp_path / "run" / "checkpoints" / "ckpt_00000004.pt", weights_only=True)
    assert all(torch.isfinite(t).all() for t in state["model"].values())
    assert [p.name for p in list_checkpoints(tmp_path / "run" / "checkpoints")] == ["ckpt_00000004.pt"]


def test_config_conflicts_are_caught_before_any_model(tmp_path):
    from tinylm_hf import TrainConfig

    with pytest.raises(ValueError, match="warmup_iters .* larger than max_iters"):
        TrainConfig(data_dir="d", max_iters=10, warmup_iters=20)
    with pytest.raises(ValueError, match="max_lr must be a finite number"):
        TrainConfig(data_dir="d", max_lr=float("inf"))
    with pytest.raises(ValueError, match="eval_iters must be an integer >= 1"):
        TrainConfig(data_dir="d", eval_iters=0)
    with pytest.raises(ValueError, match="resume and overwrite"):
        TrainConfig(data_dir="d", resume=True, overwrite=True)


def test_validation_data_shorter_than_the_context_fails_up_front(byte_data, tmp_path):
    with pytest.raises(ValueError, match="val.bin has .* too few for context_length 20000"):
        train(tiny_config(byte_data, tmp_path / "run", context_length=20000))
    assert not (tmp_path / "run" / "checkpoints").exists()


def test_overwrite_refuses_a_folder_no_tinylm_run_wrote(byte_data, tmp_path):
    """--overwrite once deleted checkpoints/, hf/ and tensorboard/ of any folder: only a run's own folder now."""
    out = tmp_path / "theirs"
    for name in ("checkpoints", "hf", "tensorboard"):
        (out / name).mkdir(parents=True)
        (out / name / "precious.bin").write_bytes(b"keep")
    with pytest.raises(FileExistsError, match="no run.json: no tinylm run wrote it"):
        train(tiny_config(byte_data, out, max_iters=4, overwrite=True))
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*.bin")) == [
        "checkpoints/precious.bin", "hf/precious.bin", "tensorboard/precious.bin"]


def test_resume_with_no_run_is_refused_not_started_fresh(byte_data, tmp_path):
    with pytest.raises(FileNotFoundError, match="no run to resume"):
        train(tiny_config(byte_data, tmp_path / "run", max_iters=4, resume=True))
    assert not (tmp_path / "run" / "run.json").exists() and not (tmp_path / "run" / "checkpoints").exists()


def test_a_typo_in_the_preset_is_refused_before_the_run_folder_is_made(byte_data, tmp_path):
    with pytest.raises(ValueError, match="unknown preset"):
        train(tiny_config(byte_data, tmp_path / "run", max_iters=4, preset="cpu-quikstart", model={}))
    assert not (tmp_path / "run").exists()
    assert train(tiny_config(byte_data, tmp_path / "run", max_iters=4)).iterations == 4


def test_a_failed_start_leaves_no_run_that_refuses_the_corrected_command(byte_data, tmp_path):
    with pytest.raises(ValueError, match="outside the vocabulary"):  # found when the model is built, in the run
        train(tiny_config(byte_data, tmp_path / "run", max_iters=4, model={"vocab_size": 8}))
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == [".lock"]
    assert train(tiny_config(byte_data, tmp_path / "run", max_iters=4)).iterations == 4


def test_an_existing_out_dir_keeps_its_mode(byte_data, tmp_path):
    out = tmp_path / "private"
    out.mkdir(mode=0o700)
    train(tiny_config(byte_data, out, max_iters=2, checkpoint_every=2))
    assert out.stat().st_mode & 0o777 == 0o700


def test_a_lock_file_that_is_a_symlink_is_refused_and_its_target_kept(tmp_path):
    target = tmp_path / "notes.txt"
    target.write_text("my notes\n")
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / ".lock").symlink_to(target)
    with pytest.raises(FileExistsError, match="is a symlink"):
        RunDirectory(tmp_path / "run").lock()
    assert target.read_text() == "my notes\n"


@pytest.mark.parametrize("text", ["[1, 2]", '{"id": 3}', "{not json"], ids=["list", "no-run-id", "not-json"])
def test_a_malformed_run_json_is_one_clear_error(tmp_path, text):
    (tmp_path / "run.json").write_text(text)
    with pytest.raises(ValueError, match="run.json is corrupt"):
        RunDirectory(tmp_path).run_id()


def test_publishing_replaces_an_earlier_model_folder_but_never_other_files(byte_data, tmp_path):
    from tinylm_hf.publish import publish_run

    summary = train(tiny_config(byte_data, tmp_path / "run", max_iters=2, checkpoint_every=2))
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "todo.txt").write_text("keep me")
    with pytest.raises(FileExistsError, match="is not a model folder"):
        publish_run(summary, notes)
    assert [p.name for p in notes.iterdir()] == ["todo.txt"]
    assert publish_run(summary) == publish_run(summary) == tmp_path / "run" / "hf"  # its own folder: replaced


def test_a_cosine_cycle_shorter_than_the_warm_up_is_refused_before_the_run_folder_is_made(byte_data, tmp_path):
    # it failed at the first step, leaving run.json and metrics.jsonl that refused the corrected command and --resume
    with pytest.raises(ValueError, match=r"cosine_cycle_iters \(1\) is smaller than warmup_iters \(2\)"):
        train(tiny_config(byte_data, tmp_path / "run", max_iters=4, cosine_cycle_iters=1))
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("resume", [False, True], ids=["corrected-command", "resume"])
def test_a_run_that_died_before_its_first_checkpoint_does_not_block_the_next_command(byte_data, tmp_path, monkeypatch,
                                                                                     capsys, resume):
    from tinylm_hf.training import loop

    real_step, calls = loop.train_step, {"n": 0}

    def failing_at_step_3(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 3:
            raise RuntimeError("a crash at step 3")
        return real_step(*args, **kwargs)

    monkeypatch.setattr(loop, "train_step", failing_at_step_3)
    with pytest.raises(RuntimeError, match="a crash at step 3"):
        train(tiny_config(byte_data, tmp_path / "run", max_iters=6, checkpoint_every=4))
    assert {"run.json", "metrics.jsonl"} <= {p.name for p in (tmp_path / "run").iterdir()}
    monkeypatch.setattr(loop, "train_step", real_step)
    capsys.readouterr()
    summary = train(tiny_config(byte_data, tmp_path / "run", max_iters=6, checkpoint_every=4, resume=resume))
    assert summary.iterations == 6 and sorted(losses(tmp_path / "run")) == [1, 2, 3, 4, 5, 6]
    said = [line for line in capsys.readouterr().out.splitlines() if "stopped before its first checkpoint" in line]
    assert len(said) == 1 and "starting afresh" in said[0]


def test_a_finished_run_without_checkpoints_still_refuses_a_new_run(byte_data, tmp_path):
    train(tiny_config(byte_data, tmp_path / "run", max_iters=2))
    for path in (tmp_path / "run" / "checkpoints").glob("*.pt"):
        path.unlink()  # its summary.json says it finished: it is not replaced unasked
    with pytest.raises(FileExistsError, match="already holds a run"):
        train(tiny_config(byte_data, tmp_path / "run", max_iters=2))
