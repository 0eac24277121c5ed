"""`tinylm quickstart`: the whole pipeline on the bundled TinyStories slice, on the CPU, in minutes."""

from __future__ import annotations

from typing import Any


def add_quickstart_parser(subparsers: Any) -> None:
    """`tinylm quickstart [--out DIR]`."""
    p = subparsers.add_parser("quickstart", help="tokenizer + data + a small model on bundled TinyStories")
    p.add_argument("--out", default="runs/quickstart", help="output folder (default: runs/quickstart)")
    p.set_defaults(func=lambda args: 0)
