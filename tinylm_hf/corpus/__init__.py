"""Corpus preparation: text -> documents -> token files (`tinylm prepare`), apart from runtime batching; and the
bundled labelled corpus-source task (`load_corpus_source_task`). Names are imported on first use."""

from __future__ import annotations

from ..lazy_exports import export_lazily

__all__ = export_lazily(__name__, {
    ".documents": ("split_documents",),
    ".prepare": ("prepare_dataset",),
    ".source_task": ("load_corpus_source_task",),
    ".token_files": ("load_tokens", "read_header", "tokenizer_fingerprint"),
})
