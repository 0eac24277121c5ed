"""Publishing: Hugging Face folders from runs, the model card, the Hub, and exports other runtimes load."""

from __future__ import annotations

from .export_gguf import export_gguf
from .export_llama import export_llama
from .folder import count_parameters, load_folder, validate_folder
from .hf_folder import publish_run
from .hub import check_repo_id, push_folder
from .model_card import render_model_card, write_model_card

__all__ = [
    "check_repo_id",
    "count_parameters",
    "export_gguf",
    "export_llama",
    "load_folder",
    "publish_run",
    "push_folder",
    "render_model_card",
    "validate_folder",
    "write_model_card",
]
