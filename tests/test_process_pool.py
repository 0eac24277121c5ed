"""process_pool: a killed worker (SIGKILL, as the OOM killer sends) fails the job within seconds, never hangs."""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from pathlib import Path

import pytest

from conftest import shared_file
from tinylm_hf.tokenization import parallel_encode
from tinylm_hf.tokenization.bpe import BPETokenizer
from tinylm_hf.tokenization.process_pool import WorkerDiedError, resolve_workers

EOT = "<|endoftext|>"


@pytest.fixture(autouse=True)
def alarm():
    """Turn a hang into a failure instead of a stuck test run."""
    signal.signal(signal.SIGALRM, lambda *_: pytest.fail("the job hung after its worker was killed"))
    signal.alarm(120)
    yield
    signal.alarm(0)


def _kill_a_worker_when_started(timeout: float = 60.0) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        workers = multiprocessing.active_children()
        if workers:
            time.sleep(0.2)  # let it take a task
            os.kill(workers[0].pid, signal.SIGKILL)
            return workers[0].pid
        time.sleep(0.01)
    raise AssertionError("no worker process started")


def test_killed_encode_file_worker_raises(tmp_path: Path) -> None:
    gpt2 = BPETokenizer.from_files(shared_file("gpt2_vocab.json"), shared_file("gpt2_merges.txt"), [EOT])
    blocks = parallel_encode.encode_file_blocks(gpt2, shared_file("pd_novels_heldout.txt"), num_workers=2)
    next(blocks)  # the pool is up and busy with the next windows
    _kill_a_worker_when_started()
    killed_at = time.monotonic()
    with pytest.raises(WorkerDiedError, match="worker process died.*encoding"):
        for _ in blocks:
            pass
    print(f"failed {time.monotonic() - killed_at:.2f} s after the kill")


@pytest.mark.parametrize("bad", [0, -1, True, 1.5, "2"])
def test_resolve_workers_rejects_non_positive_ints(bad) -> None:
    with pytest.raises(ValueError, match="num_workers"):
        resolve_workers(bad)


def test_resolve_workers_defaults_to_usable_cpus() -> None:
    assert resolve_workers(None) >= 1
    assert resolve_workers(3) == 3
