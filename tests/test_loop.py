"""The training loop on real text (bytes of the bundled TinyStories slice) with a tiny TinyLM."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import torch

from conftest import REPO_ROOT
from tiny_runs import byte_data, cli_env, losses, start_cli, tiny_config, wait_for_checkpoint, write_byte_dataset  # noqa: F401
from tinylm_hf.corpus import tokenizer_fingerprint
from tinylm_hf.publish import publish_run
from tinylm_hf.tokenizer_training import build_hf_tokenizer
from tinylm_hf.tokenizer_loading import load_tokenizer
from tinylm_hf.training import step as step_module
from tinylm_hf.training.run.checkpoint import list_checkpoints
from tinylm_hf.training.config import TrainConfig
from tinylm_hf.training.loop import NonFiniteLossError, train


def test_outputs_exist_and_published_folder_loads(byte_data, tmp_path):
    from transformers import AutoModelForCausalLM

    from tinylm_hf.publish import publish_run
    from tinylm_hf.training import RunSummary

    summary = train(tiny_config(byte_data, tmp_path / "run", plot=True))
    run = tmp_path / "run"
    assert summary.iterations == 12 and summary.tokens == 12 * 4 * 16
    assert [p.name for p in list_checkpoints(run / "checkpoints")] == ["ckpt_00000008.pt", "ckpt_00000012.pt"]
    assert summary.checkpoint == str(run / "checkpoints" / "ckpt_00000012.pt")
    assert RunSummary.load(run) == summary
    assert (run / "loss.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["iter"] for r in rows if "val_loss" in r] == [6, 12]
    assert all(isinstance(r["sample"], str) for r in rows if "val_loss" in r)
    assert all(np.isfinite(r["loss"]) for r in rows if "loss" in r)
    assert not (run / "hf").exists()  # training ends at a checkpoint; publishing is its own stage
    hf = publish_run(summary)
    for name in ("config.json", "model.safetensors", "generation_config.json", "README.md"):
        assert (hf / name).is_file(), name
        assert (hf / name).stat().st_mode & 0o777 == 0o644, name
    assert "validation loss" in (hf / "README.md").read_text().lower()
    model = AutoModelForCausalLM.from_pretrained(hf)
    x = torch.tensor([[72, 101, 108, 108, 111]])
    assert model(x).logits.shape == (1, 5, 257)


def test_samples_continue_the_opening_words_of_the_validation_text(byte_data, tmp_path):
    """Not "Once upon a time" on every corpus: the prompt comes from the run's own validation text."""
    train(tiny_config(byte_data, tmp_path / "run", max_iters=2, eval_every=0))
    val_text = np.fromfile(byte_data / "val.bin", dtype=np.uint16).astype(np.uint8).tobytes().decode("utf-8", "replace")
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    prompts = {r["sample_prompt"] for r in rows if "sample" in r}
    assert prompts == {" ".join(val_text.split()[:4])}


def test_a_given_sample_prompt_is_kept(byte_data, tmp_path, capsys):
    train(tiny_config(byte_data, tmp_path / "run", max_iters=2, eval_every=0, sample_prompt="The fox"))
    assert "sample: 'The fox' ->" in capsys.readouterr().out


def test_training_reduces_validation_loss(byte_data, tmp_path):
    summary = train(tiny_config(byte_data, tmp_path / "run", max_iters=40, eval_every=0))
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    first = [r["loss"] for r in rows if "loss" in r][0]
    assert first > 5.0  # ~ln(256) at random init
    assert summary.val_loss < first - 1.0
    assert summary.val_bpb == pytest.approx(summary.val_loss / np.log(2))  # 1 byte per token


def test_muon_trains_block_matrices_with_muon_and_reduces_the_loss(byte_data, tmp_path):
    summary = train(tiny_config(byte_data, tmp_path / "run", max_iters=40, eval_every=0, optimizer="muon",
                                muon_lr=0.05))
    first = losses(tmp_path / "run")[1]
    assert summary.val_loss < first - 1.0
    state = torch.load(summary.checkpoint, weights_only=True)["optimizer"]
    muon, *adamw = state["param_groups"]
    assert muon["use_muon"] and muon["lr"] == pytest.approx(0.05 / 3e-3 * summary.final_lr)
    assert not any(group["use_muon"] for group in adamw)
    assert {"momentum_buffer"} == set(state["state"][muon["params"][0]])


def test_resume_is_bitwise_identical(byte_data, tmp_path):
    train(tiny_config(byte_data, tmp_path / "full", cosine_cycle_iters=12))
    train(tiny_config(byte_data, tmp_path / "split", cosine_cycle_iters=12, max_iters=8))
    train(tiny_config(byte_data, tmp_path / "split", cosine_cycle_iters=12, resume=True))
    assert losses(tmp_path / "split") == losses(tmp_path / "full")
    a = torch.load(tmp_path / "full" / "checkpoints" / "ckpt_00000012.pt", weights_only=True)["model"]
    b = torch.load(tmp_path / "split" / "checkpoints" / "ckpt_00000012.pt", weights_only=True)["model"]
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_grad_accumulation_matches_one_big_batch(byte_data, tmp_path):
    train(tiny_config(byte_data, tmp_path / "one", batch_size=8, max_iters=5, eval_every=0))
    train(tiny_config(byte_data, tmp_path / "acc", batch_size=8, grad_accum_steps=4, max_iters=5, eval_every=0))
    one, acc = losses(tmp_path / "one"), losses(tmp_path / "acc")
    assert one.keys() == acc.keys()
    np.testing.assert_allclose(list(acc.values()), list(one.values()), rtol=1e-5)


def test_nan_loss_stops_and_keeps_last_good_checkpoint(byte_data, tmp_path, monkeypatch):
    real = step_module.cross_entropy
    calls = {"n": 0}

    def poisoned(logits, targets, **kw):
        calls["n"] += 1
        out = real(logits, targets, **kw)
        return out * float("nan") if calls["n"] == 6 else out  # the 6th training step

    monkeypatch.setattr(step_module, "cross_entropy", poisoned)
    with pytest.raises(NonFiniteLossError, match=r"iteration 6.*ckpt_00000004\.pt"):
        train(tiny_config(byte_data, tmp_path / "run", eval_every=0))
    assert [p.name for p in list_checkpoints(tmp_path / "run" / "checkpoints")] == ["ckpt_00000004.pt"]
    assert max(losses(tmp_path / "run")) == 5


@pytest.mark.parametrize("optimizer", ["adamw", "muon"])
def test_sigkill_mid_run_then_resume_matches_uninterrupted(byte_data, tmp_path, optimizer):
    cfg = tiny_config(byte_data, tmp_path / "killed", max_iters=150, checkpoint_every=5, eval_every=0,
                      optimizer=optimizer)
    (tmp_path / "cfg.json").write_text(json.dumps(cfg.to_dict()))
    proc = start_cli("train", "--config", str(tmp_path / "cfg.json"))
    wait_for_checkpoint(proc, tmp_path / "killed" / "checkpoints")
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    killed_at = int(list_checkpoints(tmp_path / "killed" / "checkpoints")[-1].stem.split("_")[1])
    assert killed_at < 150, "the run finished before it could be killed"
    resumed = subprocess.run([sys.executable, "-m", "tinylm_hf.cli", "train", "--config", str(tmp_path / "cfg.json"),
                              "--resume"], cwd=REPO_ROOT, env=cli_env(), capture_output=True, text=True)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "resumed from" in resumed.stdout
    train(tiny_config(byte_data, tmp_path / "ref", max_iters=150, checkpoint_every=5, eval_every=0,
                      optimizer=optimizer))
    assert losses(tmp_path / "killed") == losses(tmp_path / "ref")


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_a_stop_signal_saves_a_checkpoint_and_exits_cleanly(byte_data, tmp_path, stop):
    """Ctrl-C, and SIGTERM (a `kill`, a scheduler's time limit), stop at a checkpoint of the step reached."""
    cfg = tiny_config(byte_data, tmp_path / "run", max_iters=100_000, checkpoint_every=1000, eval_every=0)
    (tmp_path / "cfg.json").write_text(json.dumps(cfg.to_dict()))
    proc = start_cli("train", "--config", str(tmp_path / "cfg.json"))
    deadline = time.time() + 60
    while not ((tmp_path / "run" / "metrics.jsonl").is_file() and losses(tmp_path / "run")) and time.time() < deadline:
        time.sleep(0.05)
    proc.send_signal(stop)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 130, out.decode()
    assert b"Traceback" not in out and b"interrupted" in out
    last = max(losses(tmp_path / "run"))
    assert [p.name for p in list_checkpoints(tmp_path / "run" / "checkpoints")] == [f"ckpt_{last:08d}.pt"]


def test_config_file_and_flags(tmp_path):
    from tinylm_hf.cli import build_parser
    from tinylm_hf.commands.train import config_from_args

    (tmp_path / "c.yaml").write_text("data_dir: d\nbatch_size: 8\nmodel:\n  hidden_size: 64\n")
    args = build_parser().parse_args(["train", "--config", str(tmp_path / "c.yaml"), "--max-lr", "0.01",
                                      "--compile", "--grad-clip", "none"])
    cfg = config_from_args(args)
    assert (cfg.data_dir, cfg.batch_size, cfg.model, cfg.max_lr, cfg.compile, cfg.grad_clip) == \
        ("d", 8, {"hidden_size": 64}, 0.01, True, None)
    (tmp_path / "bad.json").write_text(json.dumps({"batch_sise": 3}))
    with pytest.raises(ValueError, match="batch_sise"):
        TrainConfig.from_file(tmp_path / "bad.json")
    with pytest.raises(ValueError, match="batch_size"):
        TrainConfig(batch_size=0)


def test_best_validation_checkpoint_is_kept_and_publishable(byte_data, tmp_path):
    from tinylm_hf.publish import publish_run

    summary = train(tiny_config(byte_data, tmp_path / "run", max_iters=12, eval_every=3, keep_last=1))
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    evals = {r["iter"]: r["val_loss"] for r in rows if "val_loss" in r}
    best_iter = min(evals, key=evals.get)
    best = torch.load(summary.best_checkpoint, weights_only=True)
    assert best["iteration"] == best_iter and summary.best_val_loss == pytest.approx(evals[best_iter])
    assert [p.name for p in list_checkpoints(tmp_path / "run" / "checkpoints")] == ["ckpt_00000012.pt"]
    assert publish_run(summary, tmp_path / "best_hf", checkpoint="best").is_dir()


def test_time_budget_fits_the_run_into_the_budget(byte_data, tmp_path):
    summary = train(tiny_config(byte_data, tmp_path / "run", max_iters=100_000, warmup_iters=1000, eval_every=0,
                                checkpoint_every=0, time_budget_s=3.0))
    assert 5 < summary.iterations < 100_000 and not summary.interrupted
    assert summary.checkpoint and summary.val_loss is not None


def test_plain_log_lines_when_stdout_is_not_a_terminal(byte_data, tmp_path, capsys):
    train(tiny_config(byte_data, tmp_path / "run", max_iters=4, eval_every=2, progress=True))
    out = capsys.readouterr()
    assert "\r" not in out.out + out.err  # no progress bar redraws
    assert "iter 2: val loss" in out.out and "iter 4: val loss" in out.out


def test_tensorboard_tracker_writes_events(byte_data, tmp_path):
    pytest.importorskip("tensorboard")
    train(tiny_config(byte_data, tmp_path / "run", max_iters=3, report_to="tensorboard"))
    assert list((tmp_path / "run" / "tensorboard").glob("events.out.tfevents.*"))


@pytest.mark.parametrize("tracker", ["trackio", "wandb"])
def test_missing_tracker_package_is_a_clear_error(byte_data, tmp_path, tracker, monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_tracker(name, *args, **kwargs):
        if name == tracker:
            raise ImportError(f"No module named {tracker!r}")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_tracker)
    message = rf"report_to={tracker} needs the {tracker} package: pip install 'tinylm-hf\[{tracker}\]'"
    with pytest.raises(ImportError, match=message):
        train(tiny_config(byte_data, tmp_path / "run", max_iters=2, report_to=tracker))
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == [".lock"]  # it left run.json and metrics.jsonl


def test_time_budget_on_the_process_clock_stops_the_run(byte_data, tmp_path):
    config = tiny_config(byte_data, tmp_path, max_iters=100_000, warmup_iters=0, time_budget_s=2.0,
                         time_budget_clock="process", eval_every=0, checkpoint_every=0)
    summary = train(config)
    assert 0 < summary.iterations < 100_000 and summary.val_loss is not None


def test_time_budget_clock_must_be_known(byte_data, tmp_path):
    with pytest.raises(ValueError, match="time_budget_clock"):
        tiny_config(byte_data, tmp_path, time_budget_clock="gpu")


def test_time_budget_leaves_out_the_first_step(byte_data, tmp_path, monkeypatch):
    real, calls = step_module.train_step, {"n": 0}

    def slow_first(*args, **kwargs):  # as torch.compile makes the first step
        calls["n"] += 1
        if calls["n"] == 1:
            time.sleep(2.0)
        return real(*args, **kwargs)

    monkeypatch.setattr("tinylm_hf.training.loop.train_step", slow_first)
    summary = train(tiny_config(byte_data, tmp_path / "run", max_iters=100_000, warmup_iters=10, eval_every=0,
                                checkpoint_every=0, time_budget_s=1.5))
    assert summary.iterations > 5 and not summary.interrupted


def test_resumed_time_budget_run_keeps_its_saved_plan(byte_data, tmp_path):
    from tinylm_hf.training.run.checkpoint import find_latest_checkpoint, load_state

    options = dict(max_iters=100_000, warmup_iters=10, eval_every=0, checkpoint_every=0, time_budget_s=1.0)
    first = train(tiny_config(byte_data, tmp_path / "run", **options))
    saved = load_state(find_latest_checkpoint(tmp_path / "run" / "checkpoints"))["extra"]["budget_schedule"]
    assert first.iterations <= saved[0] < 100_000  # the budget planned the run
    resumed = train(tiny_config(byte_data, tmp_path / "run", resume=True, **options))
    again = load_state(find_latest_checkpoint(tmp_path / "run" / "checkpoints"))["extra"]["budget_schedule"]
    assert again == saved and first.iterations <= resumed.iterations <= saved[0]  # not planned again


def test_init_from_a_model_of_another_tokenizer_is_refused_before_the_run_folder_is_touched(byte_data, tmp_path):
    folder = publish_run(train(tiny_config(byte_data, tmp_path / "base", max_iters=2, eval_every=0)))
    other = write_byte_dataset(tmp_path / "other", n_bytes=20_000)  # the same bytes, another tokenizer of that size
    build_hf_tokenizer({i: bytes([i]) for i in range(256)}, [], ["<|end_of_text|>"]).save_pretrained(other / "tokenizer")
    for split in ("train", "val"):  # as `prepare` with that tokenizer records it
        header = json.loads((other / f"{split}.json").read_text())
        header["tokenizer_fingerprint"] = tokenizer_fingerprint(load_tokenizer(other / "tokenizer"))
        (other / f"{split}.json").write_text(json.dumps(header))
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match="holds a model of another tokenizer than the one that made the data"):
        train(tiny_config(other, tmp_path / "run", init_from=str(folder), model={}, overwrite=True))
    assert [p.name for p in (tmp_path / "run").iterdir()] == ["notes.txt"]


def test_a_run_that_fails_at_an_evaluation_leaves_a_checkpoint_that_resumes(byte_data, tmp_path, monkeypatch):
    # a run that died at its first evaluation after training left no checkpoint, and a folder that refused the next
    # command
    from tinylm_hf.training.objectives.causal_lm import CausalLM

    real = CausalLM.evaluate

    def failing(self, *args, **kwargs):
        raise RuntimeError("the evaluation failed")

    monkeypatch.setattr(CausalLM, "evaluate", failing)
    with pytest.raises(RuntimeError, match="the evaluation failed"):
        train(tiny_config(byte_data, tmp_path / "run", max_iters=8, eval_every=6, checkpoint_every=0))
    assert (tmp_path / "run" / "checkpoints" / "ckpt_00000006.pt").is_file()
    monkeypatch.setattr(CausalLM, "evaluate", real)
    assert train(tiny_config(byte_data, tmp_path / "run", max_iters=8, eval_every=6, checkpoint_every=0,
                             resume=True)).iterations == 8
    train(tiny_config(byte_data, tmp_path / "whole", max_iters=8, eval_every=6, checkpoint_every=0))
    assert losses(tmp_path / "run") == losses(tmp_path / "whole")
