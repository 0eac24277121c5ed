"""Pure-Python work on more than one core: tasks run in forked child processes, results sent back.

Threads cannot share pure-Python work (`str.split`, `re`, `Counter` hold the GIL), so WordPiece's word
counting cuts a file in parts and counts each in a process. A forked child starts at once (no interpreter
start-up, no imports) with this process's memory shared until written, and sends its result back pickled.
Where forking is unsafe or unavailable (not Linux, or this process runs other threads), the tasks run here.
"""

from __future__ import annotations

import os
import pickle
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from typing import Any


def can_fork() -> bool:
    """Whether tasks may run in forked children: on Linux, in a process that runs no other Python thread (a
    fork copies only the calling thread, and a lock another thread holds stays locked in the child)."""
    return sys.platform.startswith("linux") and threading.active_count() == 1


def map_in_forks(fn: Callable[[Any], Any], tasks: Sequence[Any]) -> list[Any]:
    """`[fn(task) for task in tasks]`, each task after the first in a forked child, the first one here meanwhile.

    Results must be picklable (they come back through a pipe); `fn` and its tasks need not be (a child is a copy
    of this process). An exception in a child is raised here; a child that dies without an answer raises
    RuntimeError. Without `can_fork`, the tasks run here one after another.
    """
    if len(tasks) < 2 or not can_fork():
        return [fn(task) for task in tasks]
    children: list[tuple[int, int]] = []  # (process id, the pipe's reading end)
    done = False
    try:
        for task in tasks[1:]:
            read, write = os.pipe()
            pid = os.fork()
            if pid == 0:  # the child: never returns
                os.close(read)
                _send_result(fn, task, write)
            os.close(write)
            children.append((pid, read))
        results = [fn(tasks[0])]
        results += [_receive_result(pid, read) for pid, read in children]
        done = True
        return results
    finally:
        for pid, read in children:
            if not done:  # a task failed: the others' results are not wanted
                _kill(pid)
            os.close(read)
            _wait(pid)


def _send_result(fn: Callable[[Any], Any], task: Any, write: int) -> None:
    """In the child: run the task, write (ok, result or exception) pickled to the pipe, and exit (no cleanup of
    the parent's state, which is the parent's to do)."""
    status = 1  # an answer that cannot be pickled or written: the parent sees none
    try:
        try:
            result = (True, fn(task))
        except BaseException as exc:  # noqa: BLE001 - every failure is the caller's to see
            result = (False, exc)
        with os.fdopen(write, "wb") as pipe:
            pipe.write(pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL))
        status = 0
    finally:
        os._exit(status)


def _receive_result(pid: int, read: int) -> Any:
    chunks = []
    while chunk := os.read(read, 1 << 20):
        chunks.append(chunk)
    if not chunks:
        raise RuntimeError(f"a forked worker ended without an answer (exit status {_wait(pid)}); "
                           "if memory ran out, pass num_workers=1")
    ok, value = pickle.loads(b"".join(chunks))
    if not ok:
        raise value
    return value


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _wait(pid: int) -> int:
    """The child's exit code (negative: the signal that ended it); 0 if it was already waited for."""
    try:
        return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    except ChildProcessError:
        return 0
