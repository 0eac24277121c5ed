"""jit: numba loads only when a kernel first runs (never for `import tinylm_hf` or `tinylm --help`), and where it
is missing the pure-Python references run, said once in one line. Checked in fresh processes."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from conftest import PACKAGE_DATA

PROBE = """
import sys
{setup}
{code}
print(sys.modules.get("numba") is not None, file=sys.stderr)
"""
# Makes numba unimportable, as on a machine without it (find_spec answers None, import raises ImportError).
HIDE_NUMBA = 'sys.modules["numba"] = None'
ENCODE = f"""
from tinylm_hf.tokenization.bpe.core import BPETokenizer
vocab = {{i: bytes([i]) for i in range(256)}} | {{256: b"ab"}}
tok = BPETokenizer(vocab, [(b"a", b"b")], ["<|endoftext|>"])
print("built", sys.modules.get("numba") is not None, file=sys.stderr)
text = open({str(PACKAGE_DATA / "tinystories_train_small.txt")!r}, encoding="utf-8").read()[:20000]
print(hash(tuple(tok.encode(text))), tok.encode("ab ab"), file=sys.stderr)
tok.encode("ab")
"""

COUNT_SPANS = """
import numpy as np
from tinylm_hf.tokenization.pretoken_counts_kernels import count_spans
count_spans(np.frombuffer(b"ab ab", dtype=np.uint8), np.array([0, 2]), np.array([2, 5]), np.ones(2, dtype=np.int64))
"""


def run(code: str, setup: str = "", **env: str) -> list[str]:
    """The stderr lines of `code` in a fresh interpreter (the last says whether numba was imported); a warning that
    an upstream package prints on import comes before them, so callers look for their own lines."""
    done = subprocess.run([sys.executable, "-c", PROBE.format(setup=setup, code=code)], capture_output=True,
                          text=True, timeout=600, env=os.environ | env)
    assert done.returncode == 0, done.stderr
    return done.stderr.strip().splitlines()


def test_import_tinylm_hf_does_not_import_numba() -> None:
    assert run("import tinylm_hf, tinylm_hf.tokenization")[-1] == "False"


def test_cli_help_does_not_import_numba() -> None:
    code = "from tinylm_hf.cli import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass"
    assert run(code)[-1] == "False"


def test_numba_loads_at_the_first_encode_not_at_construction() -> None:
    lines = run(ENCODE)
    assert [line for line in lines if line.startswith("built ")] == ["built False"]
    assert lines[-1] == "True"


def test_without_numba_the_reference_runs_and_says_so_once() -> None:
    with_kernels = run(ENCODE)
    lines = run(ENCODE, setup=HIDE_NUMBA)
    notes = [line for line in lines if "numba is not installed" in line]
    assert len(notes) == 1 and "pip install numba" in notes[0]
    assert lines[-1] == "False"
    assert lines[-2] == with_kernels[-2]  # the same ids


def test_a_compile_is_said_once_and_a_kernel_loaded_from_the_cache_is_not(tmp_path) -> None:
    from tinylm_hf.tokenization.jit import COMPILING_NOTE

    cold = run(COUNT_SPANS, NUMBA_CACHE_DIR=str(tmp_path))  # an empty cache: numba compiles
    warm = run(COUNT_SPANS, NUMBA_CACHE_DIR=str(tmp_path))
    assert cold.count(COMPILING_NOTE) == 1
    assert COMPILING_NOTE not in warm


def test_kernels_can_be_turned_off() -> None:
    lines = run(ENCODE, TINYLM_KERNELS="0")
    assert lines[-1] == "False"
    assert not [line for line in lines if "numba" in line]
    assert lines[-2] == run(ENCODE)[-2]


@pytest.mark.parametrize("bad", [0, -1, True, 1.5, "2"])
def test_resolve_workers_rejects_non_positive_ints(bad) -> None:
    from tinylm_hf.tokenization.jit import resolve_workers

    with pytest.raises(ValueError, match="num_workers"):
        resolve_workers(bad)


def test_resolve_workers_defaults_to_usable_cpus() -> None:
    from tinylm_hf.tokenization.jit import resolve_workers

    assert resolve_workers(None) >= 1
    assert resolve_workers(3) == 3
