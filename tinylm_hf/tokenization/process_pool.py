"""Worker-process pools for parallel encoding and BPE pre-token counting.

One owner for three decisions: how many workers (`resolve_workers`), how they start (fork where the
platform has it, so large read-only state such as a tokenizer is shared, not pickled), and what a
dead worker means: `concurrent.futures` notices a killed worker's exit at once and fails every
pending task, which `map_in_order` turns into a `WorkerDiedError` naming the job, instead of the
hang a `multiprocessing.Pool` gives (it silently replaces the worker and waits for a result that
never comes).
"""

from __future__ import annotations

import gc
import multiprocessing
import os
from multiprocessing import resource_tracker
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import TypeVar

from .jit import resolve_workers  # noqa: F401  (its home; trainers import it from here)

T = TypeVar("T")
R = TypeVar("R")


class WorkerDiedError(ChildProcessError):
    """A worker process ended abruptly (killed, out of memory, crashed); the job produced no result.

    A ChildProcessError (an OSError), as prepare's, so the CLI reports it in one line.
    """


def make_executor(
    workers: int, initializer: Callable[..., None] | None = None, initargs: tuple = ()
) -> ProcessPoolExecutor:
    """A started pool of `workers` processes, forked where possible (initargs are then inherited, not pickled)."""
    methods = multiprocessing.get_all_start_methods()
    context = multiprocessing.get_context("fork" if "fork" in methods else "spawn")
    # Workers must share the parent's resource tracker: one started in a worker would "clean up"
    # shared memory the worker handed to the parent (and the parent already freed) at exit.
    resource_tracker.ensure_running()
    executor = ProcessPoolExecutor(workers, mp_context=context, initializer=initializer, initargs=initargs)
    # Forked workers start on the first submit. Frozen objects are never scanned by the children's
    # collector, so the parent's pages (the tokenizer, the vocabulary) stay shared.
    gc.freeze()
    try:
        executor.submit(int).result()
    finally:
        gc.unfreeze()
    return executor


def map_in_order(
    executor: ProcessPoolExecutor,
    fn: Callable[[T], R],
    tasks: Iterable[T],
    *,
    max_in_flight: int,
    job: str,
    on_abandoned: Callable[[R], None] | None = None,
) -> Iterator[R]:
    """Yield `fn(task)` for each task in order, with at most `max_in_flight` tasks submitted ahead.

    Tasks are drawn from `tasks` lazily, so a generator of large inputs stays bounded in memory. A
    dead worker raises `WorkerDiedError` naming `job`; results already computed but never yielded
    are handed to `on_abandoned` (e.g. to free shared memory).
    """
    pending: deque[Future] = deque()
    try:
        for task in tasks:
            pending.append(executor.submit(fn, task))
            if len(pending) >= max_in_flight:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
    except BrokenProcessPool as exc:
        raise WorkerDiedError(
            f"a worker process died (killed, out of memory or crashed) while {job}; "
            "nothing was returned. Check the system log (e.g. dmesg) for the OOM killer, "
            "or run again with num_workers=1"
        ) from exc
    finally:
        for future in pending:
            if not future.cancel() and on_abandoned is not None and future.done() and not future.exception():
                on_abandoned(future.result())
