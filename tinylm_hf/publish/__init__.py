"""Publishing: Hugging Face folders from runs, the model card, the Hub, and exports other runtimes load.
Names are imported on first use."""

from __future__ import annotations

from ..lazy_exports import export_lazily

__all__ = export_lazily(__name__, {
    ".export_gguf": ("export_gguf",),
    ".export_llama": ("export_llama",),
    ".folder": ("count_parameters", "load_folder", "validate_folder"),
    ".hf_folder": ("publish_run",),
    ".hub": ("check_repo_id", "push_folder"),
    ".model_card": ("render_model_card", "write_model_card"),
})
