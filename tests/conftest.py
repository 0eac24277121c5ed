"""Shared fixtures: where the real data lives, and tiny trained tokenizers made on the fly."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
PACKAGE_DATA = REPO_ROOT / "tinylm_hf" / "data"


def _find_shared_data() -> Path | None:
    env = os.environ.get("TINYLM_SHARED_DATA")
    candidates = [Path(env)] if env else []
    candidates += [REPO_ROOT.parent / "shared" / "data", REPO_ROOT / "shared" / "data"]
    for candidate in candidates:
        if candidate.is_dir():
            return candidate
    return None


SHARED_DATA = _find_shared_data()


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The folder ../shared/data (or $TINYLM_SHARED_DATA); tests that need it skip without it."""
    if SHARED_DATA is None:
        pytest.skip("../shared/data is not available")
    return SHARED_DATA


def shared_file(name: str) -> Path:
    """Path of one file in ../shared/data, skipping the calling test when it is missing."""
    if SHARED_DATA is None or not (SHARED_DATA / name).is_file():
        pytest.skip(f"../shared/data/{name} is not available")
    return SHARED_DATA / name


@pytest.fixture(scope="session")
def bundled_train_path() -> Path:
    """The TinyStories training slice shipped inside the package."""
    return PACKAGE_DATA / "tinystories_train_small.txt"


_HIDE_TINYLM = '''"""sitecustomize for test subprocesses: make tinylm_hf unimportable, even when it is pip-installed.

A stand-in for a machine that has only the saved folder (remote code) and not this package.
"""
import os
import sys


def _module_of(finder):
    return finder.__module__ if isinstance(finder, type) else type(finder).__module__


def _holds_tinylm(entry):
    return isinstance(entry, str) and os.path.isdir(os.path.join(entry or os.getcwd(), "tinylm_hf"))


sys.path[:] = [p for p in sys.path if not _holds_tinylm(p)]
# setuptools' editable install adds a finder (and path hook) from a module named after the package
sys.meta_path[:] = [f for f in sys.meta_path if "tinylm_hf" not in (_module_of(f) or "")]
sys.path_hooks[:] = [h for h in sys.path_hooks if "tinylm_hf" not in (getattr(h, "__module__", "") or "")]
sys.path_importer_cache.clear()
'''


def env_without_tinylm(workdir: Path, **extra: str) -> dict[str, str]:
    """Environment for a subprocess in which `tinylm_hf` cannot be imported, offline.

    Works whether the package is on PYTHONPATH or installed (editable or not): a sitecustomize
    module on PYTHONPATH removes every route to it before the subprocess runs any code.
    """
    hook_dir = Path(workdir) / "_without_tinylm"
    hook_dir.mkdir(parents=True, exist_ok=True)
    (hook_dir / "sitecustomize.py").write_text(_HIDE_TINYLM)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env.update(PYTHONPATH=str(hook_dir), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    env.update(extra)
    return env


@pytest.fixture(autouse=True)
def one_torch_thread():
    """Tests use tiny matrices: a second intra-op thread only adds spin-waiting (~100x on a busy 2-core box)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def error_lines(err: str) -> list[str]:
    """The lines of a command's stderr less the first-run compile notice, which precedes an error whenever the
    kernels compile before the bad input is found (a cold numba cache: the first test of a fresh clone to encode)."""
    from tinylm_hf.tokenization.jit import COMPILING_NOTE

    return [line for line in err.strip().splitlines() if line != COMPILING_NOTE]


def run_cli_error(argv: list[str], capsys: pytest.CaptureFixture) -> str:
    """Run `tinylm ARGV`, expect a user error (exit 2, one line, no traceback); return the message."""
    from tinylm_hf.cli import main

    capsys.readouterr()
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2, f"exit code {code}, stderr: {err}"
    lines = error_lines(err)
    assert "Traceback" not in err and len(lines) == 1, err
    return lines[0] + "\n"
