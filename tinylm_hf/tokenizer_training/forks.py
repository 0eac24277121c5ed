"""Pure-Python work on more than one core: tasks run in forked child processes, results sent back.

Threads cannot share pure-Python work (`str.split`, `re`, `Counter` hold the GIL), so WordPiece's word
counting cuts a file in parts and counts each in a process. A forked child starts at once (no interpreter
start-up, no imports) with this process's memory shared until written, and sends its result back pickled.
Where forking is unsafe or unavailable (not Linux, or this process runs other threads), the tasks run here.
"""

from __future__ import annotations

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
    import multiprocessing  # here: single-process runs never pay for its import

    context = multiprocessing.get_context("fork")
    children = []
    done = False
    try:
        for task in tasks[1:]:
            receive, send = context.Pipe(duplex=False)
            child = context.Process(target=_send_result, args=(fn, task, send), daemon=True)
            child.start()
            send.close()  # the child holds the sending end: its exit ends the pipe
            children.append((child, receive))
        results = [fn(tasks[0])]
        for child, receive in children:
            results.append(_receive_result(child, receive))
        done = True
        return results
    finally:
        for child, receive in children:
            if not done:  # a task failed: the others' results are not wanted
                child.terminate()
            child.join()
            receive.close()


def _send_result(fn: Callable[[Any], Any], task: Any, send: Any) -> None:
    try:
        result = (True, fn(task))
    except BaseException as exc:  # noqa: BLE001 - every failure is the caller's to see
        result = (False, exc)
    send.send(result)
    send.close()


def _receive_result(child: Any, receive: Any) -> Any:
    try:
        ok, value = receive.recv()
    except EOFError:
        child.join()
        raise RuntimeError(f"a forked worker ended without an answer (exit code {child.exitcode}); "
                           "if memory ran out, pass num_workers=1") from None
    if not ok:
        raise value
    return value
