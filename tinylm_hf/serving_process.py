"""transformers' server (>= 5.25) with TinyLM's setup in the process that loads the model.

transformers 5.25's ``Serve`` runs in the calling thread until stopped and loads the model in a process it spawns,
which starts with none of the calling process's setup: ``getattr(transformers, "TinyLMForCausalLM")`` fails there,
and a from-scratch tokenizer has no ``tokenizers`` twin. The spawned process unpickles the server's model loader,
so a loader of this module's class imports this module there and runs the setup before it loads anything.
Imported only where transformers' server is installed.
"""

from __future__ import annotations

from typing import Any

from transformers.cli.serve import Serve
from transformers.cli.serving.model_manager import ModelLoader

from .serving_setup import prepare_process


class TinyLMModelLoader(ModelLoader):
    """transformers' model loader, preparing the model's process (`prepare_process`) before it loads."""

    def load_model_and_processor(self, model_id: str, *args: Any, **kwargs: Any) -> Any:
        prepare_process()
        return super().load_model_and_processor(model_id, *args, **kwargs)


class TinyLMServe(Serve):
    """transformers' ``Serve``, whose model loader is a `TinyLMModelLoader` (same settings)."""

    def run(self, *args: Any, **kwargs: Any) -> None:
        self.loader.__class__ = TinyLMModelLoader  # set by Serve.__init__ just before it calls run
        super().run(*args, **kwargs)
