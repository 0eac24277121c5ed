"""Raw and full training checkpoints: round trips through paths and file objects, atomicity, keep-last-K."""

from __future__ import annotations

import io
import json
import os

import pytest
import torch

from tinylm_hf.training.run.checkpoint import (
    CheckpointError,
    find_latest_checkpoint,
    list_checkpoints,
    load_checkpoint,
    load_training_state,
    save_checkpoint,
    save_training_state,
)
from tinylm_hf.training.optimizer import AdamW
from tiny_runs import TINY_MODEL, byte_data  # noqa: F401  (byte_data is a fixture)


def _trained_pair(seed: int = 0):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    opt = AdamW(model.parameters(), lr=1e-2)
    for _ in range(3):
        model(torch.randn(5, 4)).pow(2).mean().backward()
        opt.step()
        opt.zero_grad()
    return model, opt


def _fresh_pair():
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    return model, AdamW(model.parameters(), lr=1e-2)


def _assert_same(a_model, a_opt, b_model, b_opt):
    for (ka, va), (kb, vb) in zip(a_model.state_dict().items(), b_model.state_dict().items()):
        assert ka == kb and torch.equal(va, vb)
    sa, sb = a_opt.state_dict(), b_opt.state_dict()
    assert sa["param_groups"] == sb["param_groups"]
    for i in sa["state"]:
        for k in sa["state"][i]:
            assert torch.equal(torch.as_tensor(sa["state"][i][k]), torch.as_tensor(sb["state"][i][k]))


@pytest.mark.parametrize("target", ["path", "bytesio"])
def test_save_load_round_trip(tmp_path, target):
    model, opt = _trained_pair()
    out = tmp_path / "c.pt" if target == "path" else io.BytesIO()
    save_checkpoint(model, opt, 42, out)
    if target == "bytesio":
        out.seek(0)
    model2, opt2 = _fresh_pair()
    assert load_checkpoint(out, model2, opt2) == 42
    _assert_same(model, opt, model2, opt2)


def test_resumed_optimizer_continues_identically(tmp_path):
    model, opt = _trained_pair()
    save_checkpoint(model, opt, 3, tmp_path / "c.pt")
    model2, opt2 = _fresh_pair()
    load_checkpoint(tmp_path / "c.pt", model2, opt2)
    x = torch.randn(5, 4)
    for m, o in ((model, opt), (model2, opt2)):
        m(x).pow(2).mean().backward()
        o.step()
    _assert_same(model, opt, model2, opt2)


def test_path_write_is_atomic_and_leaves_no_temp(tmp_path, monkeypatch):
    model, opt = _trained_pair()
    save_checkpoint(model, opt, 1, tmp_path / "c.pt")
    before = (tmp_path / "c.pt").read_bytes()

    def broken_save(obj, f, *a, **k):
        f.write(b"partial")
        raise OSError("disk full")

    monkeypatch.setattr(torch, "save", broken_save)
    with pytest.raises(OSError, match="disk full"):
        save_checkpoint(model, opt, 2, tmp_path / "c.pt")
    assert (tmp_path / "c.pt").read_bytes() == before
    assert os.listdir(tmp_path) == ["c.pt"]


def test_missing_checkpoint_raises(tmp_path):
    model, opt = _fresh_pair()
    with pytest.raises(FileNotFoundError, match="nope.pt"):
        load_checkpoint(tmp_path / "nope.pt", model, opt)


def test_training_state_restores_rng_and_keeps_last_k(tmp_path):
    model, opt = _trained_pair()
    gen = torch.Generator().manual_seed(5)
    torch.randint(0, 10, (3,), generator=gen)
    for it in (10, 20, 30, 40):
        save_training_state(tmp_path, model=model, optimizer=opt, iteration=it, generator=gen, train_config={"a": 1},
                            model_config={}, metrics=[{"iter": it}], keep_last=2)
    assert [p.name for p in list_checkpoints(tmp_path)] == ["ckpt_00000030.pt", "ckpt_00000040.pt"]
    assert find_latest_checkpoint(tmp_path).name == "ckpt_00000040.pt"
    expected_sample = torch.randint(0, 1000, (4,), generator=gen)
    expected_global = torch.rand(3)

    model2, opt2 = _fresh_pair()
    gen2 = torch.Generator().manual_seed(999)
    torch.manual_seed(123)
    state = load_training_state(find_latest_checkpoint(tmp_path), model=model2, optimizer=opt2, generator=gen2)
    assert state["iteration"] == 40 and state["metrics"] == [{"iter": 40}] and state["train_config"] == {"a": 1}
    assert torch.equal(torch.randint(0, 1000, (4,), generator=gen2), expected_sample)
    _assert_same(model, opt, model2, opt2)
    assert torch.equal(torch.rand(3), expected_global)  # the global stream continues from the save point
    assert find_latest_checkpoint(tmp_path / "empty") is None


class _Payload:
    """What a malicious checkpoint carries: unpickling it would run `touch MARKER`."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_planted_payload_never_runs(tmp_path):
    marker = tmp_path / "pwned"
    path = tmp_path / "ckpt_00000001.pt"
    torch.save({"model": {}, "optimizer": {}, "iteration": 1, "extra": _Payload(str(marker))}, path)
    model, opt = _fresh_pair()
    with pytest.raises(CheckpointError, match="would run code"):
        load_checkpoint(path, model, opt)
    with pytest.raises(CheckpointError, match="would run code"):
        load_training_state(path, model=model, optimizer=opt)
    assert not marker.exists()


def test_checkpoint_of_another_run_is_refused(tmp_path):
    model, opt = _trained_pair()
    path = save_training_state(tmp_path, model=model, optimizer=opt, iteration=3, generator=None, train_config={},
                               model_config={}, metrics=[], run_id="run-a")
    with pytest.raises(CheckpointError, match="belongs to run 'run-a'"):
        load_training_state(path, model=model, optimizer=opt, run_id="run-b")


def test_non_finite_weights_are_never_saved(tmp_path):
    model, opt = _trained_pair()
    with torch.no_grad():
        model[0].weight[0, 0] = float("nan")
    with pytest.raises(ValueError, match="non-finite weights"):
        save_training_state(tmp_path, model=model, optimizer=opt, iteration=1, generator=None, train_config={},
                            model_config={}, metrics=[])
    assert list_checkpoints(tmp_path) == []


def test_full_disk_names_the_folder_and_keeps_the_old_file(tmp_path, monkeypatch):
    import errno

    model, opt = _trained_pair()
    save_checkpoint(model, opt, 1, tmp_path / "c.pt")
    before = (tmp_path / "c.pt").read_bytes()

    def no_space(obj, f, *a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(torch, "save", no_space)
    with pytest.raises(OSError, match=f"no space left on {tmp_path}"):
        save_checkpoint(model, opt, 2, tmp_path / "c.pt")
    assert (tmp_path / "c.pt").read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == ["c.pt"]


def test_checkpoint_files_are_world_readable(tmp_path):
    model, opt = _trained_pair()
    save_checkpoint(model, opt, 1, tmp_path / "c.pt")
    assert (tmp_path / "c.pt").stat().st_mode & 0o777 == 0o644


def test_a_disk_filling_mid_checkpoint_stops_train_with_one_line(byte_data, tmp_path, monkeypatch, capsys):
    """A write failing with ENOSPC inside torch.save surfaced as torch's RuntimeError ("unexpected pos"), a
    traceback; now it is one line, and the previous checkpoint stays whole."""
    import errno

    from conftest import run_cli_error
    from tinylm_hf.training.run import checkpoint

    class DiskFullAtStep4(checkpoint.CheckpointFile):
        def write_through(self, data):
            if "00000004" in str(self.name) and self.tell() + len(data) > 4096:
                raise OSError(errno.ENOSPC, "No space left on device")
            return super().write_through(data)

    monkeypatch.setattr(checkpoint, "CheckpointFile", DiskFullAtStep4)
    out = tmp_path / "run"
    err = run_cli_error(["train", "--data-dir", str(byte_data), "--out-dir", str(out), "--max-iters", "6",
                         "--warmup-iters", "1", "--checkpoint-every", "2", "--eval-every", "0", "--batch-size", "2",
                         "--context-length", "16", "--threads", "1", "--model", json.dumps(TINY_MODEL)], capsys)
    assert f"no space left on {out / 'checkpoints'}" in err and "--resume" in err
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == ["ckpt_00000002.pt", "tokenizer"]  # + the kept tokenizer
    assert checkpoint.load_state(out / "checkpoints" / "ckpt_00000002.pt")["iteration"] == 2


# ----------------------------------------------------------------------------- the one reader


def test_read_checkpoint_returns_every_entry_of_a_training_checkpoint(tmp_path):
    from tinylm_hf.modeling import TinyLMConfig
    from tinylm_hf.training.run.checkpoint import read_checkpoint

    model, opt = _trained_pair()
    config = TinyLMConfig(vocab_size=32, **TINY_MODEL)
    path = save_training_state(tmp_path, model=model, optimizer=opt, iteration=7, generator=None,
                               train_config={"objective": "mlm", "optimizer": "adamw"}, model_config=config.to_dict(),
                               metrics=[{"iter": 7}], extra={"loss": 1.5}, run_id="run-a")
    checkpoint = read_checkpoint(path)
    assert (checkpoint.path, checkpoint.iteration, checkpoint.run_id) == (path, 7, "run-a")
    assert (checkpoint.objective, checkpoint.metrics, checkpoint.extra) == ("mlm", [{"iter": 7}], {"loss": 1.5})
    assert checkpoint.train_config["optimizer"] == "adamw" and set(checkpoint.rng) >= {"python", "numpy", "torch"}
    saved_config = checkpoint.tinylm_config()
    assert (saved_config.vocab_size, saved_config.hidden_size) == (32, TINY_MODEL["hidden_size"])
    model2, opt2 = _fresh_pair()
    model2.load_state_dict(checkpoint.model)
    opt2.load_state_dict(checkpoint.optimizer)
    _assert_same(model, opt, model2, opt2)


def test_a_raw_checkpoint_reads_with_no_run_entries_and_no_model_config(tmp_path):
    from tinylm_hf.training.run.checkpoint import read_checkpoint

    model, opt = _trained_pair()
    save_checkpoint(model, opt, 3, tmp_path / "raw.pt")
    checkpoint = read_checkpoint(tmp_path / "raw.pt")
    assert (checkpoint.iteration, checkpoint.run_id, checkpoint.model_config, checkpoint.metrics) == (3, None, None, [])
    with pytest.raises(ValueError, match="raw.pt has no model config: it is not a training checkpoint"):
        checkpoint.tinylm_config()


def test_a_checkpoint_from_before_runs_recorded_objectives_reads_with_none(tmp_path):
    from tinylm_hf.training.run.checkpoint import read_checkpoint

    model, opt = _trained_pair()
    path = save_training_state(tmp_path, model=model, optimizer=opt, iteration=1, generator=None, train_config={},
                               model_config={"use_bidirectional_attention": True}, metrics=[])
    assert read_checkpoint(path).objective is None  # objective_class(None, model_config) picks by the model


def test_read_checkpoint_never_runs_a_planted_payload(tmp_path):
    from tinylm_hf.training.run.checkpoint import read_checkpoint

    marker = tmp_path / "pwned"
    torch.save({"model": {}, "x": _Payload(str(marker))}, tmp_path / "evil.pt")
    with pytest.raises(CheckpointError, match="would run code"):
        read_checkpoint(tmp_path / "evil.pt")
    assert not marker.exists()
