"""Package `__init__`s that import nothing until a name is used (PEP 562).

`import tinylm_hf` and the `tinylm` command line run every package `__init__` on their way to a module; these
`__init__`s only name where each public name lives, so starting up costs no torch, transformers or datasets.
`from tinylm_hf import TinyLMConfig` imports `tinylm_hf.modeling` then, on that first use.
"""

from __future__ import annotations

import importlib
import sys
import types
from collections.abc import Mapping, Sequence


class LazyPackage(types.ModuleType):
    """A package whose public names are imported from their modules on first use."""

    _exports: dict[str, str]  # public name -> module, relative to the package

    def __getattr__(self, name: str) -> object:
        module = self._exports.get(name)
        if module is None:
            if not name.startswith("_"):  # `package.submodule` as before, when __init__ imported them all
                try:
                    return importlib.import_module(f"{self.__name__}.{name}")
                except ModuleNotFoundError as err:
                    if err.name != f"{self.__name__}.{name}":
                        raise
            raise AttributeError(f"module {self.__name__!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module, self.__name__), name)
        super().__setattr__(name, value)  # later uses skip __getattr__
        return value

    def __setattr__(self, name: str, value: object) -> None:
        # Importing a submodule binds it to the package's attribute of its name. Where the package exports a
        # function of that name (`publish.export_gguf`), the function wins, as when __init__ imported it.
        if isinstance(value, types.ModuleType) and name in self._exports:
            return
        super().__setattr__(name, value)

    def __dir__(self) -> list[str]:
        return sorted({*super().__dir__(), *self._exports})


def export_lazily(package: str, exports: Mapping[str, Sequence[str]]) -> list[str]:
    """Make `package` (an `__init__`'s `__name__`) import each name of `exports` (module -> names) on first use.

    Returns the exported names, sorted, for the package's `__all__`.
    """
    module = sys.modules[package]
    where = {name: source for source, names in exports.items() for name in names}
    module.__class__ = LazyPackage
    object.__setattr__(module, "_exports", where)
    return sorted(where)
