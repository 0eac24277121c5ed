"""A saved folder's remote code, built from the import closure of the classes it names.

transformers loads a folder's classes (`trust_remote_code=True`) from flat modules beside its config: it
imports the module an `auto_map` entry names and follows `from .x import` between files of that one folder.
So `save_pretrained` builds that product from the package, as transformers' modular converter writes the
flat `modeling_*.py` from the `modular_*.py` people read: every tinylm_hf module the saved classes reach
through relative imports is written flat, under a name unique in the whole package (`flat_names`), with
those imports rewritten to the flat names. The package's own layout is then free of the loader's constraint.

An entry module (one `auto_map` names) also imports every module of its closure by name, right after its
first import (`compat`, which refuses an unsupported transformers in one line): transformers < 5.10 copies
only the modules an entry file imports itself, and fails on the rest before running any of them.

This module is copied into the folders it builds (the classes' `save_pretrained` imports it); there it
does nothing: a class loaded from a folder's flat code is saved by transformers' own copying.
"""

from __future__ import annotations

import ast
import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import Any

PACKAGE = "tinylm_hf"
PACKAGE_DIR = Path(__file__).resolve().parent


def is_packaged(cls: type) -> bool:
    """Whether `cls` comes from the installed package (not from a saved folder's flat copy)."""
    return __name__ == f"{PACKAGE}.remote_code" and cls.__module__.startswith(PACKAGE + ".")


@cache
def flat_names() -> dict[str, str]:
    """Dotted module -> its flat name in a saved folder: the shortest tail of its dotted path, joined with "_",
    that no other module of the package has (`tokenization.bpe.core` -> `bpe_core` beside `unigram.core`)."""
    modules = [module_of(path) for path in sorted(PACKAGE_DIR.rglob("*.py")) if path.name != "__init__.py"]
    parts = {module: module.split(".")[1:] for module in modules}
    names = {}
    for module, dotted in parts.items():
        for size in range(1, len(dotted) + 1):
            tail = dotted[-size:]
            if sum(other[-size:] == tail for other in parts.values()) == 1:
                names[module] = "_".join(tail)
                break
    return names


@cache
def modules_by_flat_name() -> dict[str, str]:
    """Flat name in a saved folder -> the dotted module (`flat_names` turned round)."""
    return {flat: module for module, flat in flat_names().items()}


def module_of(path: Path) -> str:
    """The dotted name of a package file: .../tinylm_hf/tokenization/bpe/core.py -> "tinylm_hf.tokenization.bpe.core"."""
    relative = path.resolve().relative_to(PACKAGE_DIR).with_suffix("")
    return ".".join((PACKAGE, *relative.parts))


def source_file(module: str) -> Path:
    return PACKAGE_DIR.joinpath(*module.split(".")[1:]).with_suffix(".py")


def relative_imports(module: str) -> list[tuple[ast.ImportFrom, str]]:
    """Each relative `from ... import` in `module` (inside functions too) with the dotted module it names."""
    tree = ast.parse(source_file(module).read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = module.split(".")[: -node.level]
            target = ".".join(base + ([node.module] if node.module else []))
            if target not in flat_names():
                raise ValueError(f"{source_file(module)}:{node.lineno} imports {target!r}, a package: remote code "
                                 "needs `from .module import name` (import the module that defines the name)")
            found.append((node, target))
    return sorted(found, key=lambda pair: (pair[0].lineno, pair[0].col_offset))


def import_closure(entries: Iterable[str]) -> list[str]:
    """`entries` and every package module their relative imports reach, in the order first reached."""
    reached = list(dict.fromkeys(entries))
    for module in reached:
        for _, target in relative_imports(module):
            if target not in reached:
                reached.append(target)
    return reached


def flat_source(module: str, closure: list[str] | None = None) -> str:
    """The source of `module` with its relative imports naming flat siblings; with `closure` (an entry module),
    also an import of each module of `closure` after its first import, for transformers < 5.10."""
    lines = source_file(module).read_text(encoding="utf-8").splitlines(keepends=True)
    imports = relative_imports(module)
    for node, target in reversed(imports):
        names = ", ".join(alias.name + (f" as {alias.asname}" if alias.asname else "") for alias in node.names)
        first, last = lines[node.lineno - 1], lines[node.end_lineno - 1]
        statement = f"from .{flat_names()[target]} import {names}"
        lines[node.lineno - 1: node.end_lineno] = [first[: node.col_offset] + statement + last[node.end_col_offset:]]
    if closure and imports:
        listed = "".join(f"from .{flat_names()[other]} import __name__ as _\n" for other in closure[1:])
        at = imports[0][0].lineno  # the first relative import stands on one line: the entry modules' `compat`
        lines.insert(at, "# every module of this folder, for transformers < 5.10 (which copies only these)\n" + listed)
    return "".join(lines)


def remote_ref(cls: type) -> str:
    """What `auto_map` calls `cls` in a folder this module builds: "flat_module.ClassName"."""
    return f"{flat_names()[cls.__module__]}.{cls.__name__}"


def write_remote_code(folder: str | os.PathLike, refs: Iterable[str]) -> list[Path]:
    """Write the flat code of every class `refs` names (`auto_map` values of this package) into `folder`."""
    by_flat = modules_by_flat_name()
    entries = list(dict.fromkeys(by_flat[ref.split("--")[-1].partition(".")[0]] for ref in refs))
    written = []
    for module in import_closure(entries):
        entry_closure = import_closure([module]) if module in entries else None
        path = Path(folder) / f"{flat_names()[module]}.py"
        path.write_text(flat_source(module, entry_closure), encoding="utf-8")
        written.append(path)
    return written


def resolve_ref(ref: str) -> type:
    """The package class an `auto_map` value of this package names ("flat_module.ClassName")."""
    import importlib

    flat, _, name = ref.partition(".")
    by_flat = modules_by_flat_name()
    return getattr(importlib.import_module(by_flat[flat]), name)


def remote_code_files(refs: Iterable[str]) -> frozenset[str]:
    """The file names `write_remote_code(folder, refs)` writes."""
    by_flat = modules_by_flat_name()
    closure = import_closure(by_flat[ref.partition(".")[0]] for ref in refs)
    return frozenset(f"{flat_names()[module]}.py" for module in closure)


@contextmanager
def building_remote_code(*classes: type) -> Iterator[bool]:
    """While transformers saves an object of `classes`, it copies no code (`_auto_class` is None); yields whether
    the caller builds the folder's code instead (the classes are registered and come from the package)."""
    build = all(is_packaged(cls) for cls in classes) and any(cls._auto_class is not None for cls in classes)
    if not build:
        yield False
        return
    own: list[tuple[type, Any]] = [(cls, cls.__dict__.get("_auto_class", _UNSET)) for cls in classes]
    for cls, _ in own:
        cls._auto_class = None
    try:
        yield True
    finally:
        for cls, value in own:
            if value is _UNSET:
                del cls._auto_class
            else:
                cls._auto_class = value


_UNSET = object()
