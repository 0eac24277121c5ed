"""The library's layout rules, read from its source: no import cycles (between modules or between top-level
packages), no alias modules, training apart from publishing, runtime tokenizer code apart from training code, and
short functions."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from conftest import REPO_ROOT

PACKAGE = REPO_ROOT / "tinylm_hf"
MAX_FUNCTION_LINES = 80


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO_ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def _is_type_checking_block(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def _imported_names(path: Path) -> list[str]:
    """Every module `path` imports, wherever the import stands (in functions too), as dotted names.

    `from x import y` imports the module `x.y` when there is one, else `x`; `importlib.import_module` with
    a literal name counts too. Imports under `if TYPE_CHECKING:` never run and are left out.
    """
    package = module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(".")[0]
    names: list[str] = []
    todo: list[ast.AST] = [ast.parse(path.read_text(encoding="utf-8"))]
    while todo:
        node = todo.pop()
        if _is_type_checking_block(node):
            continue
        todo.extend(ast.iter_child_nodes(node))
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([node.module] if node.module else []))
            names += [f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base for alias in node.names]
        elif isinstance(node, ast.Call) and ast.unparse(node.func).endswith("import_module") and node.args:
            target = node.args[0]
            if isinstance(target, ast.Constant) and isinstance(target.value, str):
                names.append(package + target.value if target.value.startswith(".") else target.value)
    return names


def import_graph() -> dict[str, set[str]]:
    """Module -> the tinylm_hf modules it imports.

    A module's implicit import of the packages above it is Python's doing, not the module's, and is
    left out (otherwise every module would sit in a cycle with the re-exporting `tinylm_hf/__init__`).
    """
    return {
        name: {target for target in _imported_names(path) if target in MODULES and target != name}
        for name, path in MODULES.items()
    }


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    cycles.append(sorted(component))
    return cycles


def test_the_cycle_finder_finds_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert find_cycles(graph) == [["a", "b", "c"]]


def test_the_graph_sees_lazy_and_relative_imports() -> None:
    graph = import_graph()
    assert "tinylm_hf.tokenization.bpe.kernels" in graph["tinylm_hf.tokenization.bpe.core"]  # inside a function
    assert "tinylm_hf.tokenization.pretokenize" in graph["tinylm_hf.tokenization.bpe.train"]


def test_no_import_cycles() -> None:
    assert find_cycles(import_graph()) == []


def _top_level_statements(body: list[ast.stmt]) -> list[ast.stmt]:
    """The statements that run at import, with the bodies of top-level `if` and `try` opened (not TYPE_CHECKING)."""
    found: list[ast.stmt] = []
    for node in body:
        if isinstance(node, ast.If) and not _is_type_checking_block(node):
            found += _top_level_statements(node.body + node.orelse)
        elif isinstance(node, ast.Try):
            handlers = [statement for handler in node.handlers for statement in handler.body]
            found += _top_level_statements(node.body + handlers + node.orelse + node.finalbody)
        else:
            found.append(node)
    return found


def is_alias_module(path: Path) -> bool:
    """Whether the module at `path` only stands for others: it replaces itself in `sys.modules`, or defines no
    function, class or value of its own (binding an imported name to another name, `X = other.Y`, is not one).
    """
    own: list[str] = []
    for node in _top_level_statements(ast.parse(path.read_text(encoding="utf-8")).body):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            own.append(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Subscript) and ast.unparse(t.value) == "sys.modules" for t in targets):
                return True
            if node.value is not None and not isinstance(node.value, (ast.Name, ast.Attribute)):
                own += [t.id for t in targets if isinstance(t, ast.Name) and t.id != "__all__"]
    return not own


def test_no_module_is_an_alias_for_another() -> None:
    """Moved modules leave no alias behind: callers import the module where it lives. Package `__init__`s
    (which name their members) and `__main__` scripts (which run a call) are what they are."""
    modules = {name: path for name, path in MODULES.items() if path.name not in ("__init__.py", "__main__.py")}
    assert [name for name, path in modules.items() if is_alias_module(path)] == []


@pytest.mark.parametrize("source, alias", [
    pytest.param("import sys\nfrom .run import state as _moved\nsys.modules[__name__] = _moved\n", True, id="sys-modules"),
    pytest.param('"""Doc."""\nfrom .run.state import RunState, restore\n__all__ = ["RunState", "restore"]\n', True,
                 id="re-export"),
    pytest.param("from .run import state\nRunState = state.RunState\n", True, id="renamed-re-export"),
    pytest.param("def f():\n    return 1\nimport sys\nsys.modules[__name__] = f\n", True, id="defines-and-swaps"),
    pytest.param('EOS_TOKEN = "<|endoftext|>"\n', False, id="a-constant"),
    pytest.param("from .state import RunState\n\n\ndef resume() -> RunState:\n    return RunState()\n", False,
                 id="a-function"),
    pytest.param("try:\n    import numba\nexcept ImportError:\n    class numba: ...\n", False, id="a-fallback-class"),
])
def test_an_alias_module_is_found(tmp_path: Path, source: str, alias: bool) -> None:
    (tmp_path / "module.py").write_text(source, encoding="utf-8")
    assert is_alias_module(tmp_path / "module.py") is alias


# the trainers' modules in tokenization/: beside each family's `train.py`, and what the trainers share
FAMILY_TRAINING_MODULES = ("bpe.merges", "bpe.merges_kernels", "unigram.lattice", "unigram.lattice_kernels",
                           "unigram.paths", "unigram.seeds", "word_splitting", "pair_merges", "piece_rules",
                           "pretoken_counts", "pretoken_counts_kernels")


def is_tokenizer_training(name: str) -> bool:
    return (name.startswith("tinylm_hf.tokenizer_training") or name.endswith(".train")
            or name.removeprefix("tinylm_hf.tokenization.") in FAMILY_TRAINING_MODULES)


def test_a_saved_tokenizer_folder_carries_no_training_code() -> None:
    """What a saved folder carries (the import closure of a family's classes, `remote_code.py`) reaches no trainer."""
    from tinylm_hf.remote_code import import_closure
    from tinylm_hf.tokenization.families import FAMILIES

    is_training = is_tokenizer_training
    classes = [cls for family in FAMILIES.values() for cls in (family.slow, family.fast)]
    reached = {cls.__name__: [m for m in import_closure([cls.__module__]) if is_training(m)] for cls in classes}
    assert {name: modules for name, modules in reached.items() if modules} == {}


def test_publishing_imports_no_tokenizer_trainer() -> None:
    """The family table's runtime half is beside the tokenizers: publishing reads it without loading a trainer."""
    graph = import_graph()
    reached = [name for name in graph if name.startswith("tinylm_hf.publish")]
    for name in reached:
        reached.extend(t for t in graph.get(name, ()) if t.startswith("tinylm_hf.") and t not in reached)
    assert sorted(name for name in reached if is_tokenizer_training(name)) == []


def package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """Top-level package or module (`tinylm_hf.training`, `tinylm_hf.cli`) -> those its modules import.

    `tinylm_hf/__init__` re-exports every package, and a `__main__` module is run, never imported: neither
    closes a cycle, so both are left out.
    """
    def top(name: str) -> str:
        return ".".join(name.split(".")[:2])

    packages: dict[str, set[str]] = {}
    for name, targets in graph.items():
        if name == "tinylm_hf" or name.endswith(".__main__"):
            continue
        packages.setdefault(top(name), set()).update(top(t) for t in targets if t != "tinylm_hf" and top(t) != top(name))
    return packages


def test_the_package_graph_joins_a_package_s_modules() -> None:
    graph = {"tinylm_hf.a.x": {"tinylm_hf.b.y"}, "tinylm_hf.b.y": {"tinylm_hf.b.z"}, "tinylm_hf.b.z": {"tinylm_hf.a"},
             "tinylm_hf.c.__main__": {"tinylm_hf.a.x"}, "tinylm_hf": {"tinylm_hf.c"}}
    assert package_graph(graph) == {"tinylm_hf.a": {"tinylm_hf.b"}, "tinylm_hf.b": {"tinylm_hf.a"}}
    assert find_cycles(package_graph(graph)) == [["tinylm_hf.a", "tinylm_hf.b"]]


def test_no_import_cycles_between_top_level_packages() -> None:
    """Packages form layers (tokenization -> ... -> training -> publish -> commands): no package reaches back
    into one that imports it, even through a module that has no cycle of its own."""
    assert find_cycles(package_graph(import_graph())) == []


def test_training_never_imports_publish() -> None:
    """Publishing reads runs, not the other way round: no module of tinylm_hf/training (its run/ and objectives/
    included, imports inside functions too) imports tinylm_hf.publish."""
    graph = import_graph()
    training = [name for name in graph if name == "tinylm_hf.training" or name.startswith("tinylm_hf.training.")]
    reached = {name: sorted(t for t in graph[name] if t.split(".")[:2] == ["tinylm_hf", "publish"]) for name in training}
    assert {name: targets for name, targets in reached.items() if targets} == {}


def functions() -> list[tuple[str, int]]:
    """(`path::qualified name`, lines from `def` to its last line) of every function in the library."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        where = path.relative_to(REPO_ROOT).as_posix()
        todo: list[tuple[ast.AST, str]] = [(ast.parse(path.read_text(encoding="utf-8")), "")]
        while todo:
            node, prefix = todo.pop()
            for child in ast.iter_child_nodes(node):
                name = getattr(child, "name", None)
                inner = f"{prefix}{name}." if name else prefix
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    found.append((f"{where}::{prefix}{child.name}", child.end_lineno - child.lineno + 1))
                todo.append((child, inner))
    return sorted(found)


# tinylm_hf/training/loop.py is being rewritten on another branch (issue 21, the training loop, into a loop of
# named calls); its long function is known and allowed here until that rewrite lands: then remove this set.
BEING_REWRITTEN = {"tinylm_hf/training/loop.py::_train"}
FUNCTIONS = functions()


@pytest.mark.parametrize(
    "name, lines",
    [pytest.param(name, lines, marks=pytest.mark.xfail(strict=True, reason="the loop rewrite shortens it"))
     if name in BEING_REWRITTEN else (name, lines) for name, lines in FUNCTIONS],
    ids=[name for name, _ in FUNCTIONS],
)
def test_no_function_is_over_80_lines(name: str, lines: int) -> None:
    assert lines <= MAX_FUNCTION_LINES, f"{name} is {lines} lines long; split it into named steps"
