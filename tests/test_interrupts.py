"""Ctrl-C or SIGTERM during training sets a flag instead of stopping the process, and only inside the `with`."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from tinylm_hf.training.interrupts import InterruptFlag


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["sigint", "sigterm"])
def test_a_stop_signal_sets_the_flag_and_the_old_handler_returns(stop):
    before = signal.getsignal(stop)
    with InterruptFlag() as interrupt:
        assert not interrupt.requested
        os.kill(os.getpid(), stop)
        deadline = time.time() + 5
        while not interrupt.requested and time.time() < deadline:
            time.sleep(0.01)
        assert interrupt.requested
    assert signal.getsignal(stop) is before


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
