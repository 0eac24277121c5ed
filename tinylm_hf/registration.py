"""The one place TinyLM's classes are registered with transformers' Auto classes.

After `register()`, `AutoConfig`, `AutoModel`, `AutoModelForCausalLM`, `AutoModelForMaskedLM`, the task Auto
classes (`task_heads`) and `AutoTokenizer` resolve `model_type="tinylm"` folders to the installed classes, so a
folder's own `*.py` files are never needed (nor run) while tinylm_hf is installed.
`register_for_auto_class` makes `save_pretrained` write `auto_map` and copy the code, so saved
folders also load where tinylm_hf is not installed, with `trust_remote_code=True`.

`import tinylm_hf` calls `register_when_transformers_loads()`: registering imports torch and transformers' model
classes (seconds), so it runs as soon as transformers' Auto classes are loaded and not before. A process that
never touches them (`tinylm --help`) never pays for it; one that does finds TinyLM registered. This module
imports neither library until then.
"""

from __future__ import annotations

import importlib.abc
import sys
import threading
from typing import Any

# The modules every Auto class lookup goes through: once one is loaded, registration is due.
AUTO_MODULES = (
    "transformers.models.auto.configuration_auto",
    "transformers.models.auto.modeling_auto",
    "transformers.models.auto.tokenization_auto",
)
# Top-level packages whose imports the watcher follows: registration waits until none of theirs is half done.
WATCHED_PACKAGES = ("transformers", "tinylm_hf")

_DONE = False


def task_heads() -> dict[Any, type]:
    """Auto class -> the TinyLM head it returns, for a causal-LM or a masked-LM TinyLM folder alike."""
    from transformers import (
        AutoModelForQuestionAnswering,
        AutoModelForSequenceClassification,
        AutoModelForTokenClassification,
    )

    from .modeling import TinyLMForQuestionAnswering, TinyLMForSequenceClassification, TinyLMForTokenClassification

    return {
        AutoModelForSequenceClassification: TinyLMForSequenceClassification,
        AutoModelForTokenClassification: TinyLMForTokenClassification,
        AutoModelForQuestionAnswering: TinyLMForQuestionAnswering,
    }


def register() -> None:
    """Register config, models and tokenizers with the Auto classes (idempotent)."""
    global _DONE
    if _DONE:
        return
    from transformers import AutoConfig, AutoModel, AutoModelForCausalLM, AutoModelForMaskedLM, AutoTokenizer
    from transformers.models.auto import tokenization_auto

    from .modeling import TinyLMConfig, TinyLMForCausalLM, TinyLMForMaskedLM, TinyLMModel
    from .tokenization.families import FAMILIES

    AutoConfig.register(TinyLMConfig.model_type, TinyLMConfig, exist_ok=True)
    AutoModel.register(TinyLMConfig, TinyLMModel, exist_ok=True)
    AutoModelForCausalLM.register(TinyLMConfig, TinyLMForCausalLM, exist_ok=True)
    AutoModelForMaskedLM.register(TinyLMConfig, TinyLMForMaskedLM, exist_ok=True)
    for auto_class, head in task_heads().items():
        auto_class.register(TinyLMConfig, head, exist_ok=True)
        head.register_for_auto_class(auto_class.__name__)
    # The tokenizer of a TinyLM model folder: with both classes given, AutoTokenizer returns the fast one.
    bpe = FAMILIES["bpe"]
    AutoTokenizer.register(TinyLMConfig, slow_tokenizer_class=bpe.slow, fast_tokenizer_class=bpe.fast, exist_ok=True)
    TinyLMConfig.register_for_auto_class("AutoConfig")
    TinyLMModel.register_for_auto_class("AutoModel")
    TinyLMForCausalLM.register_for_auto_class("AutoModelForCausalLM")
    TinyLMForMaskedLM.register_for_auto_class("AutoModelForMaskedLM")
    for family in FAMILIES.values():
        register_tokenizer_pair(tokenization_auto, family.slow, family.fast)
    _DONE = True


def register_tokenizer_pair(tokenization_auto: Any, slow: type, fast: type) -> None:
    """Make AutoTokenizer return `fast` for a folder whose tokenizer_config.json names either class.

    As for transformers' own models: the fast twin has all of transformers' tokenizer API (offsets, word ids,
    assistant masks); `slow.from_pretrained(folder)` runs the hand-written core (AutoTokenizer ignores
    `use_fast=False` in transformers 5). Both classes save an `auto_map` naming both, the fast one second.
    """
    tokenization_auto.REGISTERED_TOKENIZER_CLASSES[slow.__name__] = slow
    tokenization_auto.REGISTERED_TOKENIZER_CLASSES[fast.__name__] = fast
    # the name table AutoTokenizer.register(slow_tokenizer_class=, fast_tokenizer_class=) fills
    tokenization_auto.REGISTERED_FAST_ALIASES[slow.__name__] = fast
    slow.register_for_auto_class("AutoTokenizer")
    fast.register_for_auto_class("AutoTokenizer")


def register_when_transformers_loads() -> None:
    """Register now if transformers' Auto classes are loaded, else as soon as an import loads them.

    Until then an import watcher (`_RegisterAfterImports`) follows the imports of transformers and tinylm_hf
    modules; when the outermost of them finishes with an Auto module loaded, it registers. Waiting for the
    outermost keeps registration from importing a module that is still half imported (transformers'
    `modeling_utils` loads `configuration_auto` midway).
    """
    if _DONE:
        return
    if _auto_classes_loaded():
        register()
    elif _WATCHER not in sys.meta_path:
        sys.meta_path.insert(0, _WATCHER)


def _auto_classes_loaded() -> bool:
    return any(name in sys.modules for name in AUTO_MODULES)


class _RegisterAfterImports(importlib.abc.MetaPathFinder):
    """Finds nothing itself: wraps the loader of each watched module, to register once their imports finish."""

    def __init__(self) -> None:
        self._depth = threading.local()  # watched imports under way in this thread

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname.partition(".")[0] not in WATCHED_PACKAGES or self not in sys.meta_path:
            return None
        for finder in sys.meta_path[sys.meta_path.index(self) + 1:]:
            spec = getattr(finder, "find_spec", lambda *args: None)(fullname, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _AfterExec(spec.loader, self)
                return spec
        return None

    def enter(self) -> None:
        self._depth.value = getattr(self._depth, "value", 0) + 1

    def leave(self, succeeded: bool) -> None:
        self._depth.value -= 1
        if succeeded and self._depth.value == 0 and not _DONE and _auto_classes_loaded():
            if self in sys.meta_path:
                sys.meta_path.remove(self)
            register()


class _AfterExec:
    """A loader that runs `loader`, then tells the watcher; the module keeps `loader` as its own."""

    def __init__(self, loader: Any, watcher: _RegisterAfterImports) -> None:
        self._loader = loader
        self._watcher = watcher

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loader, name)

    def create_module(self, spec: Any) -> Any:
        return self._loader.create_module(spec)

    def exec_module(self, module: Any) -> None:
        spec = module.__spec__
        module.__loader__ = spec.loader = self._loader
        self._watcher.enter()
        succeeded = False
        try:
            self._loader.exec_module(module)
            succeeded = True
        finally:
            self._watcher.leave(succeeded)


_WATCHER = _RegisterAfterImports()
