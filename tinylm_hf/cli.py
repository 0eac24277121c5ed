"""The `tinylm` command line: each command is its module in `tinylm_hf.commands` (`commands.COMMANDS`).

Errors a user can fix (a bad flag value, a missing file, a used out-dir, a full disk) print one line
saying what is wrong and exit 2; `--debug` shows the traceback instead. Ctrl-C exits 130. SIGTERM (a `kill`,
a job scheduler's time limit) is raised as `Terminated` in the command, so that its cleanups run (a staged
folder or temp file is removed, worker pools are stopped) before it exits 143.

The command line answers at once: the command modules import their libraries inside `run`, only the
command named on the line gets its flags built, and nothing before `run` loads torch, transformers or
datasets (docs/architecture.md).
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
import threading
from collections.abc import Collection
from types import FrameType
from typing import Any

from .commands import COMMANDS
from .training.errors import NonFiniteLossError
from .training.run.folder import RunInUseError

USER_ERRORS = (ValueError, TypeError, OSError, ImportError, RunInUseError, NonFiniteLossError)
EXIT_USER_ERROR = 2
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 128 + signal.SIGTERM
RESEND_SECONDS = 0.05  # a SIGTERM that arrived inside a finalizer is sent again after this long


class Terminated(BaseException):
    """SIGTERM arrived: raised where the command was, so that `finally` and `except BaseException` cleanups run."""


def raise_on_sigterm() -> Any:
    """Make SIGTERM raise `Terminated` in this process (a process forked from it, a worker, still just dies);
    returns the handler it replaced (None outside the main thread, where Python sets no handlers).

    A signal that arrives inside a finalizer (`__del__`, where Python prints an exception and drops it) is sent
    again a moment later, so that it is raised where the command runs."""
    pid = os.getpid()

    def handle(signum: int, frame: FrameType | None) -> None:
        if os.getpid() != pid:  # a forked worker inherited this handler: die as SIGTERM's default would
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        if _in_finalizer(frame):
            threading.Timer(RESEND_SECONDS, os.kill, (pid, signum)).start()
            return
        raise Terminated(f"terminated by signal {signum}")

    try:
        return signal.signal(signal.SIGTERM, handle)
    except ValueError:
        return None


def _in_finalizer(frame: FrameType | None) -> bool:
    while frame is not None:
        if frame.f_code.co_name == "__del__":
            return True
        frame = frame.f_back
    return False


def build_parser(with_flags: Collection[str] = tuple(COMMANDS)) -> argparse.ArgumentParser:
    """The `tinylm` parser: every command, those named in `with_flags` with their flags.

    Building a command's flags may import what its choices come from (the tokenizer families): `main` builds
    only those of the command on its line.
    """
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--debug", action="store_true", help="show the full traceback of an error")
    parser = argparse.ArgumentParser(prog="tinylm", description="Train a small language model from scratch, "
                                     "natively in Hugging Face.", parents=[common])
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, module_name in COMMANDS.items():
        module = importlib.import_module(f".commands.{module_name}", __package__)
        sub = subparsers.add_parser(name, help=module.HELP, description=module.__doc__, parents=[common])
        if name in with_flags:
            module.add_arguments(sub)
        sub.set_defaults(run=module.run)
    return parser


def named_command(argv: list[str]) -> str | None:
    """The command `argv` names (its first word that is not an option), or None."""
    return next((arg for arg in argv if not arg.startswith("-")), None)


def disable_progress_bars() -> None:
    """Plain log lines, no progress bars (ours, datasets', transformers'), when output goes to a file or pipe.

    Libraries not loaded yet read it from the environment when they load (importing them here would cost the
    start-up seconds); those already loaded are told.
    """
    os.environ.update(TQDM_DISABLE="1", HF_DATASETS_DISABLE_PROGRESS_BARS="1", HF_HUB_DISABLE_PROGRESS_BARS="1")
    if "datasets" in sys.modules:
        sys.modules["datasets"].disable_progress_bars()
    if "huggingface_hub" in sys.modules:
        sys.modules["huggingface_hub"].utils.disable_progress_bars()
    if "transformers" in sys.modules:
        sys.modules["transformers"].utils.logging.disable_progress_bar()


def check_utf8_arguments(argv: list[str]) -> None:
    """Refuse an argument holding bytes that are not UTF-8 (typed in a Latin-1 terminal, or a file name that is not
    UTF-8: Python keeps them as lone surrogates, which no tokenizer, JSON file or weights reader takes), naming its
    flag."""
    for before, arg in zip(["", *argv], argv):
        try:
            arg.encode("utf-8")
        except UnicodeEncodeError as err:
            flag = next((a.split("=", 1)[0] for a in (arg, before) if a.startswith("-")), "an argument")
            byte = ord(arg[err.start]) - 0xDC00
            raise ValueError(f"{flag} holds the byte 0x{byte:02X}, which is not UTF-8 (a Latin-1 terminal, or a file "
                             "name that is not UTF-8?): type it in a UTF-8 locale (LANG=C.UTF-8), or rename the file") from None


def main(argv: list[str] | None = None) -> int:
    """Run one `tinylm` command; returns its exit code."""
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser(with_flags=[named_command(argv)]).parse_args(argv)
    if not sys.stdout.isatty():
        disable_progress_bars()
    previous = raise_on_sigterm()
    try:
        check_utf8_arguments(argv)
        return int(args.run(args) or 0)
    except KeyboardInterrupt:
        print(f"tinylm {args.command}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Terminated:
        print(f"tinylm {args.command}: terminated", file=sys.stderr)
        return EXIT_TERMINATED
    except USER_ERRORS as err:
        if args.debug:
            raise
        message = " ".join(line.strip() for line in str(err).splitlines() if line.strip()) or type(err).__name__
        if isinstance(err, OSError) and err.filename and str(err.filename) not in message:
            message = f"{message}: {err.filename}"
        print(f"tinylm {args.command}: error: {message} (--debug shows the traceback)", file=sys.stderr)
        return EXIT_USER_ERROR
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":
    sys.exit(main())
