"""numba, imported when a kernel first runs: the one module of the package that touches it.

A kernel is a plain Python function over numpy arrays and numbers, written as the textbook loop, in a
`*_kernels.py` module and decorated with `njit()` below: numba compiles it at its first call and caches it
on disk (beside its source, or in the user's cache folder where the install is read-only: numba picks the
first that is writable). Every kernel sits beside a
short pure-Python reference of the same algorithm: the specification, the oracle the tests compare the
kernel to, and the path that runs where numba is not installed (a saved folder's remote code on a machine
without it). `kernels_enabled()` says which path runs, and says it once, in one line, when it is the slow one.
A first run compiles for tens of seconds: that is said once too, when numba actually compiles one of our
kernels (its cache is cold), never when it loads them from the cache.

Importing this module imports neither numba nor numpy, so `import tinylm_hf` and `tinylm --help` stay light;
a caller imports a kernel module inside the function that runs it, after `kernels_enabled()`.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import sys
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

# Set to "0" to run the pure-Python references even where numba is installed (tests, debugging).
KERNELS_ENV = "TINYLM_KERNELS"
INSTALL_HINT = "pip install numba"
COMPILING_NOTE = "tinylm_hf: compiling the tokenizer kernels once (cached for later runs)"
IN_FLIGHT_PER_WORKER = 2  # tasks a thread may have ahead of the consumer: bounds the memory of results not yet read


@functools.cache
def numba_installed() -> bool:
    """Whether numba can be imported here (looked up without importing it)."""
    return importlib.util.find_spec("numba") is not None


def kernels_enabled() -> bool:
    """Whether the compiled kernels run: numba is installed and `TINYLM_KERNELS` is not "0".

    Where numba is missing, the first call says so on stderr, once, with how to get the fast path.
    """
    if os.environ.get(KERNELS_ENV, "1") == "0":
        return False
    if numba_installed():
        return True
    _say_reference_path_once()
    return False


@functools.cache
def _say_reference_path_once() -> None:
    print(f"tinylm_hf: numba is not installed, so tokenizers run their pure-Python reference (slower): "
          f"{INSTALL_HINT}", file=sys.stderr)


def resolve_workers(num_workers: int | None) -> int:
    """Threads (or processes) to use: `num_workers`, or the CPUs this process may run on when None."""
    if num_workers is None:
        try:
            return max(1, len(os.sched_getaffinity(0)))
        except AttributeError:  # not on Linux
            return max(1, os.cpu_count() or 1)
    if not isinstance(num_workers, int) or isinstance(num_workers, bool) or num_workers < 1:
        raise ValueError(f"num_workers must be a positive int or None, got {num_workers!r}")
    return num_workers


def map_in_threads(fn: Callable[[Any], Any], tasks: Iterable[Any], workers: int) -> Iterator[Any]:
    """`fn(task)` for each task, in order, over `workers` threads, at most `IN_FLIGHT_PER_WORKER` tasks per thread
    ahead of the consumer. Kernels release the GIL, so the threads run them at once; one worker runs inline."""
    if workers <= 1:
        yield from map(fn, tasks)
        return
    pending: deque[Future] = deque()
    with ThreadPoolExecutor(workers) as executor:
        try:
            for task in tasks:
                pending.append(executor.submit(fn, task))
                if len(pending) >= workers * IN_FLIGHT_PER_WORKER:
                    yield pending.popleft().result()
            while pending:
                yield pending.popleft().result()
        finally:
            for future in pending:
                future.cancel()


def group_by_chars(texts: Iterable[str], size: int) -> Iterator[list[str]]:
    """Consecutive texts in groups of about `size` characters (a longer text is a group of its own)."""
    group: list[str] = []
    chars = 0
    for text in texts:
        group.append(text)
        chars += len(text)
        if chars >= size:
            yield group
            group, chars = [], 0
    if group:
        yield group


def njit(*, parallel: bool = False, inline: bool = False,
         refcounts: bool = True) -> Callable[[Callable[..., Any]], Any]:
    """`numba.njit` with the package's options: cached on disk, releasing the GIL (threads run kernels at once).

    `inline=True` inlines a small helper into its callers (numba's `inline="always"`): for the helpers of
    a per-character or per-token loop, where a call costs more than the work.

    `refcounts=False` compiles without numba's reference counting (its `_nrt=False`): for a kernel that
    allocates nothing and only reads and writes the arrays it is given. Elsewhere numba may update the
    arrays' reference counts (atomic operations) at every call of a helper, which in a per-token loop
    costs more than the work (two thirds of the GPT-2 scanner's time).

    Only kernel modules call this, at their import, and they are imported only once `kernels_enabled()`
    is true (`from .x_kernels import ...` inside the function that dispatches), so numba loads on first use.
    """
    import numba

    _say_when_compiling()
    return numba.njit(cache=True, nogil=True, parallel=parallel, inline="always" if inline else "never",
                      _nrt=refcounts)


@functools.cache
def _say_when_compiling() -> None:
    """Have numba's compile event (sent only on a cache miss, never for a kernel loaded from the cache) print
    `COMPILING_NOTE` on stderr the first time it compiles a kernel of this package's."""
    from numba.core import event

    package = __name__.partition(".")[0]  # "tinylm_hf" (or "transformers_modules" where a saved folder runs it)

    class SayCompiling(event.Listener):
        def on_start(self, ev: event.Event) -> None:
            if ev.data["dispatcher"].py_func.__module__.startswith(package):
                _say_compiling_once()

        def on_end(self, ev: event.Event) -> None:
            pass

    event.register("numba:compile", SayCompiling())


@functools.cache
def _say_compiling_once() -> None:
    print(COMPILING_NOTE, file=sys.stderr, flush=True)
