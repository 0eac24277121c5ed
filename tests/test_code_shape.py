"""The shape of the library's code: no function over ~80 lines (the house rule; nanoGPT's whole loop is ~80)."""

from __future__ import annotations

import ast
from pathlib import Path

from conftest import REPO_ROOT

MAX_FUNCTION_LINES = 80
PACKAGE = REPO_ROOT / "tinylm_hf"


def long_functions(root: Path, limit: int = MAX_FUNCTION_LINES, skip: tuple[str, ...] = ()) -> list[str]:
    """`path:line name (N lines)` of every function or method under `root` longer than `limit` lines."""
    found = []
    for path in sorted(root.rglob("*.py")):
        if path.relative_to(root).parts[0] in skip:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > limit:
                    found.append(f"{path.relative_to(root)}:{node.lineno} {node.name} ({lines} lines)")
    return found


def test_no_library_function_is_longer_than_80_lines():
    assert long_functions(PACKAGE) == []


def test_a_long_method_is_found(tmp_path):
    body = "".join(f"        x{i} = {i}\n" for i in range(MAX_FUNCTION_LINES))  # def line + 80 = 81 lines
    (tmp_path / "short.py").write_text("def f():\n    return 1\n")
    (tmp_path / "long.py").write_text(f"class C:\n    def run(self):\n{body}")
    assert long_functions(tmp_path) == [f"long.py:2 run ({MAX_FUNCTION_LINES + 1} lines)"]
    (tmp_path / "long.py").write_text(f"class C:\n    def run(self):\n{body[body.index(chr(10)) + 1:]}")
    assert long_functions(tmp_path) == []
