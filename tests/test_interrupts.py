"""Ctrl-C during training sets a flag instead of raising, and only inside the `with`."""

from __future__ import annotations

import os
import signal
import threading
import time

from tinylm_hf.training.interrupts import InterruptFlag


def test_sigint_sets_the_flag_and_the_old_handler_returns():
    before = signal.getsignal(signal.SIGINT)
    with InterruptFlag() as interrupt:
        assert not interrupt.requested
        os.kill(os.getpid(), signal.SIGINT)
        deadline = time.time() + 5
        while not interrupt.requested and time.time() < deadline:
            time.sleep(0.01)
        assert interrupt.requested
    assert signal.getsignal(signal.SIGINT) is before


def test_outside_the_main_thread_sigint_is_left_alone():
    before = signal.getsignal(signal.SIGINT)
    seen = []

    def run() -> None:
        with InterruptFlag() as interrupt:
            seen.append((signal.getsignal(signal.SIGINT), interrupt.requested))

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    assert seen == [(before, False)]
