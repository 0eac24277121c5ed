"""Corpus preparation: text -> documents -> token files (`tinylm prepare`), apart from runtime batching; and the
bundled labelled corpus-source task (`load_corpus_source_task`)."""

from __future__ import annotations

from .documents import split_documents
from .prepare import prepare_dataset
from .source_task import load_corpus_source_task
from .token_files import load_tokens, read_header, tokenizer_fingerprint

__all__ = [
    "load_corpus_source_task",
    "load_tokens",
    "prepare_dataset",
    "read_header",
    "split_documents",
    "tokenizer_fingerprint",
]
