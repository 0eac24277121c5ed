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
