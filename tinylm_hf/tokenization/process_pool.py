"""What a dead worker process means (`WorkerDiedError`, raised by prepare's tokenizing pool), and the worker count.

Encoding and BPE counting run on threads now (numba kernels release the GIL); `resolve_workers` lives in `jit` and
is named here for the callers that import it from this module.
"""

from __future__ import annotations

from .jit import resolve_workers  # noqa: F401  (its home; trainers import it from here)



class WorkerDiedError(ChildProcessError):
    """A worker process ended abruptly (killed, out of memory, crashed); the job produced no result.

    A ChildProcessError (an OSError), as prepare's, so the CLI reports it in one line.
    """
