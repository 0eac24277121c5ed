"""A fixture that runs a test twice: on the numba kernels and on the pure-Python references.

Import it into a test module (`from kernel_paths import kernel_path  # noqa: F401`) and name it in a test
(or wrap it in an autouse fixture to run every test of a module both ways). `modules_loaded_by` says which
heavy modules a piece of code imports in a fresh interpreter.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tinylm_hf.tokenization.jit import KERNELS_ENV, numba_installed
from tinylm_hf.tokenization.bpe import merges as bpe_merges
from tinylm_hf.tokenization.unigram import lattice as unigram_lattice
from tinylm_hf.tokenization.wordpiece import train as wordpiece_train


@pytest.fixture(params=["kernels", "reference"])
def kernel_path(request, monkeypatch) -> str:
    """"kernels" (skipped without numba) or "reference", with `TINYLM_KERNELS` set to match (and kernels
    for inputs of every size)."""
    if request.param == "kernels" and not numba_installed():
        pytest.skip("numba is not installed")
    monkeypatch.setenv(KERNELS_ENV, "1" if request.param == "kernels" else "0")
    monkeypatch.setattr(bpe_merges, "KERNEL_MIN_SYMBOLS", 0)
    monkeypatch.setattr(unigram_lattice, "KERNEL_MIN_CHARS", 0)
    monkeypatch.setattr(wordpiece_train, "KERNEL_MIN_SYMBOLS", 0)
    return request.param


def modules_loaded_by(code: str, names: tuple[str, ...] = ("numba", "numpy")) -> list[str]:
    """Which of `names` are imported after running `code` in a fresh interpreter at the repository root."""
    report = f"\nimport json, sys\nprint(json.dumps(sorted(m for m in {names!r} if m in sys.modules)))\n"
    out = subprocess.run([sys.executable, "-c", code + report], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[1])
    return json.loads(out.stdout.strip().splitlines()[-1])
