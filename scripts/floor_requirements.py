"""Print `name==floor` for every runtime dependency in pyproject.toml: the constraints of CI's floor job.

Each floor (the `>=` bound) is a release CI installs and runs the contract tests on, so the floors
pyproject.toml declares are the ones tested; torch's too (.ci/run installs it first, as its CPU build).

    pip install -e ".[dev]" -c <(python scripts/floor_requirements.py)
"""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def floor_requirements(pyproject: Path = PYPROJECT) -> list[str]:
    """`name==version` for each dependency with a `>=version` bound, in pyproject's order."""
    dependencies = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]["dependencies"]
    pins = []
    for requirement in dependencies:
        match = re.match(r"([A-Za-z0-9_.-]+)\s*(?:\[[^]]*\])?\s*.*?>=\s*([0-9][^,;\s]*)", requirement)
        if match is None:
            raise SystemExit(f"error: {requirement!r} in {pyproject} has no '>=' floor; declare one (CI tests it)")
        name, version = match.groups()
        pins.append(f"{name}=={version}")
    return pins


if __name__ == "__main__":
    print("\n".join(floor_requirements()))
    sys.exit(0)
