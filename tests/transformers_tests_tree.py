"""transformers' own tests tree (its common suites), made importable here as the package ``transformers_tests``.

The suites (``ModelTesterMixin``, ``GenerationTesterMixin``, ``TokenizerTesterMixin``) live in transformers'
source tree, not in the wheel. ``TRANSFORMERS_TESTS_DIR`` names its ``tests`` folder, from the source
distribution of the INSTALLED version (what .ci/run downloads:
``pip download "transformers==$(python -c 'import transformers; print(transformers.__version__)')" --no-deps
--no-binary :all:``) or from a checkout of that version.

The sdist ships the top-level suite files (``test_modeling_common.py``, ``test_configuration_common.py``, ...)
but not the folders they import from: ``generation/test_utils.py`` (``GenerationTesterMixin``),
``exporters/test_export.py`` (``ExportTesterMixin``) and ``utils/test_configuration_utils.py``
(``config_common_kwargs``). Where the tree lacks one, ``MISSING_STANDINS`` puts an empty mixin (or our own
list of common config kwargs) in its place, so that the rest imports; the tests of a missing mixin do not
run, and ``missing_upstream_files`` names what was left out so that the suites can say so.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import tempfile
from pathlib import Path

import transformers

ENV_VAR = "TRANSFORMERS_TESTS_DIR"
PACKAGE = "transformers_tests"

# upstream file -> the stand-in that lets the rest of the tree import when the tree lacks it
MISSING_STANDINS = {
    "generation/test_utils.py": "class GenerationTesterMixin:\n    pass\n",
    "exporters/test_export.py": "class ExportTesterMixin:\n    pass\n",
    # the arguments every PretrainedConfig takes (ConfigTester.check_config_arguments_init sets and reads them)
    "utils/test_configuration_utils.py": (
        "config_common_kwargs = {'return_dict': False, 'output_hidden_states': True, 'output_attentions': True}\n"
    ),
}

_copies: list[tempfile.TemporaryDirectory] = []  # kept alive for the session, removed at exit


def find_tests_tree() -> Path | None:
    """The tests folder ``TRANSFORMERS_TESTS_DIR`` names; None when unset.

    Raises ValueError when it is set but is not the tests tree of the installed transformers: a CI that
    meant to run the suites must not skip them.
    """
    value = os.environ.get(ENV_VAR)
    if not value:
        return None
    folder = Path(value)
    if not (folder / "test_modeling_common.py").is_file():
        raise ValueError(f"{ENV_VAR}={value} has no test_modeling_common.py: point it at transformers' tests folder")
    version = tree_version(folder)
    if version is not None and version != transformers.__version__:
        raise ValueError(
            f"{ENV_VAR}={value} is the tests tree of transformers {version}, but {transformers.__version__} is "
            f"installed: download the sdist of {transformers.__version__} (see .ci/run)"
        )
    return folder


def tree_version(folder: Path) -> str | None:
    """The transformers version of a tests tree (its ``src/transformers/__init__.py``), None if absent."""
    init = folder.parent / "src" / "transformers" / "__init__.py"
    if not init.is_file():
        return None
    match = re.search(r'^__version__ = "([^"]+)"', init.read_text(), re.M)
    return match.group(1) if match else None


def missing_upstream_files(folder: Path) -> list[str]:
    """The files of MISSING_STANDINS that the tree lacks (their suites do not run)."""
    return [name for name in MISSING_STANDINS if not (folder / name).is_file()]


def copy_tree(folder: Path, target: Path) -> None:
    """Copy the tree's Python files (without the per-model suites) into ``target`` as a package, with stand-ins
    where files are missing."""
    for path in folder.rglob("*.py"):
        relative = path.relative_to(folder)
        if relative.parts[0] == "models":
            continue  # the per-model suites: most of the tree, and not needed
        (target / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target / relative)
    for name, text in MISSING_STANDINS.items():
        if not (target / name).exists():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            (target / name).write_text(text)
    for package in {target, *(p.parent for p in target.rglob("*.py"))}:
        (package / "__init__.py").touch()


def import_tree(folder: Path) -> None:
    """Make the tree importable as package PACKAGE (``import transformers_tests.test_modeling_common``), from a
    temporary copy."""
    copy = tempfile.TemporaryDirectory(prefix="transformers-tests-")
    _copies.append(copy)
    copy_tree(folder, Path(copy.name) / PACKAGE)
    sys.path.insert(0, copy.name)
