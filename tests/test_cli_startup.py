"""The `tinylm` command line starts without torch, transformers' model classes or datasets: `--help`, a command's
`--help` and every flag error come back before any of them loads. Checked in fresh processes, by what is loaded
(timings are scripts/bench_startup.py's)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tinylm_hf.cli import COMMANDS

HEAVY = ("torch", "datasets", "transformers.modeling_utils")
PROBE = """
import sys
from tinylm_hf.cli import main
try:
    code = main(sys.argv[1:])
except SystemExit as exit:
    code = exit.code
print(code, sorted(m for m in {heavy!r} if m in sys.modules), file=sys.stderr)
"""


def start(argv: list[str]) -> tuple[int, list[str]]:
    """(exit code, the heavy modules loaded) of `tinylm ARGV` in a fresh process."""
    done = subprocess.run([sys.executable, "-c", PROBE.format(heavy=HEAVY), *argv], capture_output=True, text=True,
                          timeout=300)
    code, loaded = done.stderr.strip().splitlines()[-1].split(" ", 1)
    return int(code), eval(loaded)  # noqa: S307  (our own probe's printed list)


@pytest.mark.parametrize("argv", [["--help"], ["train", "--help"], ["sft", "--help"]], ids=" ".join)
def test_help_loads_nothing_heavy(argv):
    assert start(argv) == (0, [])


@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_mistyped_flag_is_answered_before_anything_heavy_loads(command):
    assert start([command, "--no-such-flag"]) == (2, [])


def test_a_bad_training_value_is_answered_before_torch_loads():
    assert start(["train", "--max-iters", "5"]) == (2, [])  # warmup_iters 100 > max_iters 5


RUN_AS_MAIN = """
import runpy, sys
sys.argv = ["tinylm", "--help"]
try:
    runpy.run_module("tinylm_hf.cli", run_name="__main__")  # as `python -m tinylm_hf.cli --help`
except SystemExit:
    print("torch" in sys.modules, file=sys.stderr)
"""


def test_python_m_cli_help_leaves_torch_unloaded():
    done = subprocess.run([sys.executable, "-c", RUN_AS_MAIN], capture_output=True, text=True, timeout=300)
    assert done.stderr.strip().splitlines()[-1] == "False"
