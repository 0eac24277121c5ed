"""Corpus preparation: text -> documents -> token files (`tinylm prepare`), apart from runtime batching."""

from __future__ import annotations

from .documents import split_documents
from .prepare import prepare_dataset
from .token_files import load_tokens, read_header, tokenizer_fingerprint

__all__ = ["load_tokens", "prepare_dataset", "read_header", "split_documents", "tokenizer_fingerprint"]
