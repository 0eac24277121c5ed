"""process_pool: a killed worker (SIGKILL, as the OOM killer sends) fails the job within seconds, never hangs."""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
import time
from pathlib import Path

import pytest

from conftest import shared_file
from tinylm_hf.tokenizer_training.bpe_train import train_bpe
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


def test_killed_train_bpe_counting_worker_raises() -> None:
    outcome: dict[str, BaseException] = {}
    novels = shared_file("pd_novels_heldout.txt")  # here, not in the thread: a missing file must skip the test

    def run() -> None:
        try:
            train_bpe(novels, 300, [EOT], num_workers=2, progress=False)
        except BaseException as exc:  # handed to the test thread
            outcome["error"] = exc

    thread = threading.Thread(target=run)
    thread.start()
    _kill_a_worker_when_started()
    thread.join(timeout=60)
    assert not thread.is_alive(), "train_bpe hung after its counting worker was killed"
    assert isinstance(outcome.get("error"), WorkerDiedError), outcome
    assert "counting the pre-tokens" in str(outcome["error"])


@pytest.mark.parametrize("bad", [0, -1, True, 1.5, "2"])
def test_resolve_workers_rejects_non_positive_ints(bad) -> None:
    with pytest.raises(ValueError, match="num_workers"):
        resolve_workers(bad)


def test_resolve_workers_defaults_to_usable_cpus() -> None:
    assert resolve_workers(None) >= 1
    assert resolve_workers(3) == 3
