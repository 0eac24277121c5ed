"""Former names of flags: still taken for one release, left out of `--help`, each use said on stderr in one line.

One owner for every command's renamed flags (`quickstart --time-budget`, `dpo --valid-data`, ...), so a rename is
one call beside the flag's `add_argument`.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any


class OldSpelling(argparse.Action):
    """A flag's former name: parses as the flag `new` does, into its `dest`, and says the new name on stderr."""

    def __init__(self, option_strings: list[str], dest: str, *, new: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, **kwargs)
        self.new = new

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: object,
                 option_string: str | None = None) -> None:
        print(f"{parser.prog}: {option_string} is now called {self.new} (the old name will go)", file=sys.stderr)
        setattr(namespace, self.dest, values)


def add_old_flags(parser: argparse.ArgumentParser, flag: argparse.Action, *old: str) -> None:
    """Take the `old` names for `flag` (an `add_argument`'s result): the same value, type and destination, hidden
    from `--help`, with a one-line notice naming `flag`'s first name whenever one is used."""
    same = {"const": flag.const} if flag.const is not None else {}
    parser.add_argument(*old, action=OldSpelling, new=flag.option_strings[0], dest=flag.dest, type=flag.type,
                        nargs=flag.nargs, choices=flag.choices, metavar=flag.metavar, default=argparse.SUPPRESS,
                        help=argparse.SUPPRESS, **same)
