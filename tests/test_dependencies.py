"""What the package imports at run time is a runtime dependency in pyproject.toml, or the extra that a command's
one-line error names: never a module that only the `dev` extra happens to bring (as psutil was).

The whole-install check, every command run in a venv holding only `pip install -e .`, is CI's
(`scripts/smoke_bare_install.sh`, .ci/run); this one reads every import statement, those inside functions too.
"""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib

from conftest import REPO_ROOT

PACKAGE = REPO_ROOT / "tinylm_hf"
# imported only inside the function that needs them, whose ImportError names `pip install 'tinylm-hf[EXTRA]'`
EXTRA_IMPORTS = {"trackio": "trackio", "wandb": "wandb",  # module -> its extra (training/metrics.py)
                 "fastapi": "serve", "uvicorn": "serve", "jinja2": "serve"}  # serving*.py


def normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_names(requirements: list[str]) -> set[str]:
    return {normalized(re.match(r"[A-Za-z0-9_.-]+", r).group()) for r in requirements}


def imported_modules() -> dict[str, set[str]]:
    """Top-level name of every absolute import in the package -> the files importing it."""
    found: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                found.setdefault(name.partition(".")[0], set()).add(str(path.relative_to(REPO_ROOT)))
    return found


def test_every_import_is_a_runtime_dependency_or_a_named_extra():
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    runtime = requirement_names(project["dependencies"])
    distributions = importlib.metadata.packages_distributions()  # module -> the installed distributions providing it
    undeclared = {}
    for module, files in imported_modules().items():
        if module in sys.stdlib_module_names or module in ("__future__", "tinylm_hf"):
            continue
        if module in EXTRA_IMPORTS:
            assert normalized(module) in requirement_names(project["optional-dependencies"][EXTRA_IMPORTS[module]])
            continue
        if not {normalized(d) for d in distributions.get(module, [module])} & runtime:
            undeclared[module] = sorted(files)
    assert undeclared == {}, f"imported at run time but not in [project] dependencies: {undeclared}"
