"""map_in_forks: tasks in forked children, results and failures back in order; here where forking is unsafe."""

from __future__ import annotations

import os
import sys
import threading

import pytest

from tinylm_hf.tokenizer_training.forks import map_in_forks


@pytest.fixture
def forking(monkeypatch):
    """Fork as in a fresh process: other tests leave tqdm's monitor thread running, and `can_fork` refuses then."""
    if not sys.platform.startswith("linux"):
        pytest.skip("tasks run in forked children on Linux only")
    monkeypatch.setattr(threading, "active_count", lambda: 1)


def pid_and_square(task: int) -> tuple[int, int]:
    return os.getpid(), task * task


def test_results_come_back_in_task_order_from_other_processes(forking):
    results = map_in_forks(pid_and_square, [1, 2, 3])
    assert [square for _, square in results] == [1, 4, 9]
    pids = [pid for pid, _ in results]
    assert pids[0] == os.getpid() and len(set(pids)) == 3


def test_an_exception_in_a_child_is_raised_here(forking):
    def fail_on_two(task: int) -> int:
        if task == 2:
            raise ValueError(f"bad task {task}")
        return task

    with pytest.raises(ValueError, match="bad task 2"):
        map_in_forks(fail_on_two, [1, 2])


def test_a_child_that_dies_without_an_answer_raises_runtime_error(forking):
    def die(task: int) -> int:
        if task:
            os._exit(3)
        return task

    with pytest.raises(RuntimeError, match="exit status 3"):
        map_in_forks(die, [0, 1])


def test_tasks_run_here_while_another_thread_runs():
    release = threading.Event()
    other = threading.Thread(target=release.wait)
    other.start()
    try:
        results = map_in_forks(pid_and_square, [1, 2])
    finally:
        release.set()
        other.join()
    assert results == [(os.getpid(), 1), (os.getpid(), 4)]
