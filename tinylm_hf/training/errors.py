"""Errors of a training run that a user can fix, defined without torch so the command line knows them at start-up."""

from __future__ import annotations


class NonFiniteLossError(RuntimeError):
    """The loss or gradient norm became NaN or infinite; the weights were not updated."""
