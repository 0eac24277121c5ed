"""A tiny training run on real bytes (the bundled TinyStories slice) shared by the loop and run-folder tests."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from conftest import PACKAGE_DATA, REPO_ROOT
from tinylm_hf.training.config import TrainConfig

TINY_MODEL = {"hidden_size": 16, "intermediate_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2}


def write_byte_dataset(out: Path, n_bytes: int = 120_000, extra_special_tokens: tuple[str, ...] = ()) -> Path:
    """train.bin/val.bin holding the UTF-8 bytes of real stories, with headers, and the byte tokenizer
    (BPE without merges: id = byte value, eos 256, then `extra_special_tokens`) that reads them."""
    from tinylm_hf import EOS_TOKEN
    from tinylm_hf.corpus import tokenizer_fingerprint
    from tinylm_hf.tokenizer_training import build_hf_tokenizer

    out.mkdir(parents=True, exist_ok=True)
    tokenizer = build_hf_tokenizer({i: bytes([i]) for i in range(256)}, [], [EOS_TOKEN, *extra_special_tokens])
    tokenizer.save_pretrained(out / "tokenizer")
    raw = (PACKAGE_DATA / "tinystories_valid_small.txt").read_bytes()[:n_bytes]
    arr = np.frombuffer(raw, dtype=np.uint8).astype(np.uint16)
    cut = int(len(arr) * 0.9)
    for name, part in (("train", arr[:cut]), ("val", arr[cut:])):
        part.tofile(out / f"{name}.bin")
        (out / f"{name}.json").write_text(json.dumps(
            {"dtype": "uint16", "count": len(part), "bytes": len(part), "vocab_size": len(tokenizer), "eos_id": 256,
             "tokenizer": str(out / "tokenizer"), "tokenizer_fingerprint": tokenizer_fingerprint(tokenizer),
             "source": {"input_files": ["tinystories_valid_small.txt"]}}))
    return out



@pytest.fixture(scope="module")
def byte_data(tmp_path_factory) -> Path:
    return write_byte_dataset(tmp_path_factory.mktemp("bytes"))


def tiny_config(data: Path, out: Path, **kw) -> TrainConfig:
    values = dict(data_dir=str(data), out_dir=str(out), model=dict(TINY_MODEL), batch_size=4, context_length=16,
                  max_iters=12, warmup_iters=2, max_lr=3e-3, min_lr=3e-4, eval_every=6, eval_iters=4,
                  checkpoint_every=4, keep_last=2, progress=False, plot=False, device="cpu", seed=7, threads=1,
                  sample_tokens=4)
    values.update(kw)
    return TrainConfig(**values)


def losses(out: Path) -> dict[int, float]:
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    return {r["iter"]: r["loss"] for r in rows if "loss" in r}


def cli_env() -> dict[str, str]:
    """The environment of a `tinylm` subprocess: this checkout, offline, one thread."""
    return dict(os.environ, PYTHONPATH=str(REPO_ROOT), HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1")


def start_cli(*argv: str) -> subprocess.Popen:
    """`tinylm ARGV` in a subprocess (to kill it mid-run), its output piped."""
    return subprocess.Popen([sys.executable, "-m", "tinylm_hf.cli", *argv], cwd=REPO_ROOT, env=cli_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def wait_for_checkpoint(proc: subprocess.Popen, ckpt_dir: Path, timeout: float = 300.0) -> None:
    """Wait until the run of `proc` has written a checkpoint in `ckpt_dir` (fail if it ends or none comes)."""
    from tinylm_hf.training.run.checkpoint import list_checkpoints

    deadline = time.time() + timeout
    while time.time() < deadline:
        if list_checkpoints(ckpt_dir):
            return
        if proc.poll() is not None:
            pytest.fail(f"training exited early:\n{proc.stdout.read().decode()}")
        time.sleep(0.005)
    proc.kill()
    pytest.fail("no checkpoint appeared")


def kill_then_resume(argv: list[str], out: Path, max_iters: int) -> None:
    """`tinylm ARGV --out-dir OUT` killed (SIGKILL) after its first checkpoint, then resumed in a fresh process."""
    from tinylm_hf.training.run.checkpoint import list_checkpoints

    proc = start_cli(*argv, "--out-dir", str(out))
    wait_for_checkpoint(proc, out / "checkpoints")
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    killed_at = int(list_checkpoints(out / "checkpoints")[-1].stem.split("_")[1])
    assert killed_at < max_iters, "the run finished before it could be killed"
    resumed = subprocess.run([sys.executable, "-m", "tinylm_hf.cli", *argv, "--out-dir", str(out), "--resume"],
                             cwd=REPO_ROOT, env=cli_env(), capture_output=True, text=True)
    assert resumed.returncode == 0 and "resumed from" in resumed.stdout, resumed.stdout + resumed.stderr


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def run_two_gloo_ranks(tmp_path, *args: str) -> subprocess.CompletedProcess:
    """`torchrun --nproc_per_node 2 ARGS` (gloo, one thread a rank); fails the test if it fails."""
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1")
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc_per_node", "2",
             "--master_addr", "127.0.0.1", "--master_port", str(_free_port()), *args],
            cwd=REPO_ROOT, env=env, capture_output=True, stdin=subprocess.DEVNULL, text=True, timeout=300,
        )
    except subprocess.TimeoutExpired as err:
        pytest.fail(f"torchrun timed out:\n{err.stdout}\n{err.stderr}")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc
