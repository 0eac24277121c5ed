"""Ctrl-C during training: a flag the loop reads between steps, so that a run stops at a checkpoint, not mid-step."""

from __future__ import annotations

import contextlib
import signal
from types import FrameType, TracebackType
from typing import Any


class InterruptFlag:
    """Within `with`, SIGINT sets `requested` instead of raising KeyboardInterrupt; the old handler returns after.

    Outside the main thread (where Python cannot install signal handlers) SIGINT is left alone.
    """

    def __init__(self) -> None:
        self.requested = False
        self._previous: Any = None  # the handler to put back (None: not one Python installed)

    def __enter__(self) -> InterruptFlag:
        with contextlib.suppress(ValueError):  # not in the main thread: leave SIGINT alone
            self._previous = signal.signal(signal.SIGINT, self._request)
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)

    def _request(self, signum: int, frame: FrameType | None) -> None:
        self.requested = True
