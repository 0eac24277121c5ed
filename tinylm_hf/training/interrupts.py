"""Ctrl-C or SIGTERM during training: a flag the loop reads between steps, so that a run stops at a checkpoint,
not mid-step. SIGTERM is what `kill` and job schedulers (a Slurm time limit, a preempted machine) send before
they kill a process: a run they stop keeps a checkpoint at the step it reached and continues with `--resume`."""

from __future__ import annotations

import contextlib
import signal
from types import FrameType, TracebackType
from typing import Any

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class InterruptFlag:
    """Within `with`, SIGINT and SIGTERM set `requested` instead of stopping the process; the old handlers return
    after.

    Outside the main thread (where Python cannot install signal handlers) both are left alone.
    """

    def __init__(self) -> None:
        self.requested = False
        self._previous: dict[int, Any] = {}  # signal -> the handler to put back

    def __enter__(self) -> InterruptFlag:
        with contextlib.suppress(ValueError):  # not in the main thread: leave the signals alone
            for signum in STOP_SIGNALS:
                self._previous[signum] = signal.signal(signum, self._request)
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        for signum, handler in self._previous.items():
            if handler is not None:
                signal.signal(signum, handler)

    def _request(self, signum: int, frame: FrameType | None) -> None:
        self.requested = True
