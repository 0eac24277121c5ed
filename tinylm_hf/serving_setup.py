"""What a process needs before transformers' server loads a TinyLM folder in it: TinyLM's classes on the
transformers package, each tokenizer family's `tokenizers` twin, hub kernels off. `tinylm serve` runs it in its
own process and (transformers >= 5.25) in the process the server spawns to load the model (serving_process.py).
"""

from __future__ import annotations

import os


def expose_tinylm_classes() -> list[str]:
    """Register TinyLM with the Auto classes and make ``getattr(transformers, name)`` find each TinyLM model class.

    Returns the names it exposed. Affects only this process: nothing is written anywhere.
    """
    import importlib
    import sys

    # transformers.processing_utils runs transformers' __init__ again when first imported, putting a new module
    # object in sys.modules: import it first, so that the names go on the object the server's lookup reads
    importlib.import_module("transformers.processing_utils")
    from . import modeling
    from .registration import register

    register()
    names = [name for name in modeling.__all__ if name.startswith("TinyLMFor") or name == "TinyLMModel"]
    for name in names:
        setattr(sys.modules["transformers"], name, getattr(modeling, name))
    return names


def use_tokenizers_twins() -> None:
    """Make ``AutoTokenizer`` give each tokenizer family's exact ``tokenizers`` twin in this process.

    transformers' server streams text through the Rust tokenizer (``tokenizer._tokenizer``, which a from-scratch
    class has not): a folder naming the from-scratch class gets the twin, whose ids are the same.
    """
    from transformers.models.auto import tokenization_auto

    from .tokenizer_training.families import FAMILIES

    for family in FAMILIES.values():
        tokenization_auto.REGISTERED_TOKENIZER_CLASSES[family.slow_name] = family.fast


def keep_hub_kernels_off() -> None:
    """Have the server load every folder (a Llama export too) without hub kernels, unless USE_HUB_KERNELS says.

    transformers >= 5.25 loads a model with hub kernels on by default: on a GPU a download from the Hub at load
    time, and without `kernels` installed a refusal to load at all. The server loads through transformers' own
    ``from_pretrained`` call, which reads the switch from the environment; a value the user set is kept.
    """
    os.environ.setdefault("USE_HUB_KERNELS", "NO")


def prepare_process() -> None:
    """All of the above, in the process the server loads the model in (serving_process.py)."""
    import transformers.cli.serving.model_manager as model_manager

    from . import modeling

    for name in expose_tinylm_classes():
        # the server looks the architecture up on the transformers module it imported; in the spawned process that
        # can be an older object than the one expose_tinylm_classes sets names on (transformers re-runs its
        # __init__ when transformers.processing_utils is first imported)
        setattr(model_manager.transformers, name, getattr(modeling, name))
    use_tokenizers_twins()
    keep_hub_kernels_off()
