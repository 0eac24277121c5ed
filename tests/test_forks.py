"""map_in_forks: tasks in forked children, results and failures back in order; in this process where forking is unsafe."""

from __future__ import annotations

import os
import threading

import pytest

from tinylm_hf.tokenizer_training.forks import can_fork, map_in_forks

needs_fork = pytest.mark.skipif(not can_fork(), reason="forking is not available here")


def pid_and_square(task: int) -> tuple[int, int]:
    return os.getpid(), task * task


@needs_fork
def test_results_come_back_in_task_order_from_other_processes():
    results = map_in_forks(pid_and_square, [1, 2, 3])
    assert [square for _, square in results] == [1, 4, 9]
    pids = [pid for pid, _ in results]
    assert pids[0] == os.getpid() and len(set(pids)) == 3


@needs_fork
def test_an_exception_in_a_child_is_raised_here():
    def fail_on_two(task: int) -> int:
        if task == 2:
            raise ValueError(f"bad task {task}")
        return task

    with pytest.raises(ValueError, match="bad task 2"):
        map_in_forks(fail_on_two, [1, 2])


@needs_fork
def test_a_child_that_dies_without_an_answer_raises_runtime_error():
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
