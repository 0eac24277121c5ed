"""The versions the README and the install page name are the ones CI runs: torch at both ends of its declared range
(.ci/run), and the transformers / huggingface_hub ranges of pyproject.toml."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
CI = (REPO_ROOT / ".ci" / "run").read_text(encoding="utf-8")
PAGES = {name: (REPO_ROOT / name).read_text(encoding="utf-8") for name in ("README.md", "docs/install.md")}
DEPENDENCIES = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["dependencies"]


def declared(name: str) -> str:
    """The version specifier pyproject.toml declares for `name` (">=2.13.0", ">=5.10.1,<5.26")."""
    (requirement,) = [r for r in DEPENDENCIES if re.match(rf"{name}\b", r)]
    return requirement[len(name):]


def newest_torch() -> str:
    return re.search(r"^TORCH_NEWEST=torch==(\S+)$", CI, re.M).group(1)


def test_ci_installs_the_declared_torch_floor_from_pyproject() -> None:
    assert re.search(r"^TORCH_FLOOR=\$\(python3 scripts/floor_requirements.py \| grep '\^torch=='\)$", CI, re.M)
    assert declared("torch") == ">=2.13.0"


@pytest.mark.parametrize("page", PAGES)
def test_every_torch_a_page_installs_is_the_newest_ci_runs(page: str) -> None:
    assert set(re.findall(r"pip install torch==([0-9.]+)", PAGES[page])) == {newest_torch()}


@pytest.mark.parametrize("page", PAGES)
def test_a_page_names_both_torch_versions_ci_runs(page: str) -> None:
    floor = declared("torch").removeprefix(">=")
    text = " ".join(PAGES[page].split())
    assert f"`>={floor}`" in text and f"CI tests {floor}" in text and f"{newest_torch()}" in text


@pytest.mark.parametrize("page", PAGES)
@pytest.mark.parametrize("name", ["transformers", "huggingface_hub"])
def test_a_page_states_the_declared_range(page: str, name: str) -> None:
    assert f"{name} `{declared(name)}`" in " ".join(PAGES[page].split())
