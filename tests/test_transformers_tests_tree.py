"""The helper that finds transformers' tests tree refuses a tree CI could not run, rather than skipping."""

from __future__ import annotations

from pathlib import Path

import pytest
import transformers

from transformers_tests_tree import ENV_VAR, find_tests_tree, missing_upstream_files


def make_tree(root: Path, version: str) -> Path:
    """A minimal sdist layout: tests/test_modeling_common.py and src/transformers/__init__.py of `version`."""
    (root / "tests").mkdir(parents=True)
    (root / "tests" / "test_modeling_common.py").write_text("")
    (root / "src" / "transformers").mkdir(parents=True)
    (root / "src" / "transformers" / "__init__.py").write_text(f'__version__ = "{version}"\n')
    return root / "tests"


def test_an_unset_variable_means_no_tree(monkeypatch) -> None:
    monkeypatch.delenv(ENV_VAR, raising=False)
    assert find_tests_tree() is None


def test_the_tree_of_the_installed_version_is_found(monkeypatch, tmp_path: Path) -> None:
    tree = make_tree(tmp_path, transformers.__version__)
    monkeypatch.setenv(ENV_VAR, str(tree))
    assert find_tests_tree() == tree
    assert missing_upstream_files(tree) == [
        "generation/test_utils.py", "exporters/test_export.py", "utils/test_configuration_utils.py"
    ]


def test_another_versions_tree_is_refused_naming_both(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv(ENV_VAR, str(make_tree(tmp_path, "5.0.0")))
    with pytest.raises(ValueError, match=rf"transformers 5\.0\.0, but {transformers.__version__} is installed"):
        find_tests_tree()


def test_a_folder_without_the_suites_is_refused(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv(ENV_VAR, str(tmp_path))
    with pytest.raises(ValueError, match="has no test_modeling_common.py"):
        find_tests_tree()
