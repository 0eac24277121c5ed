"""Evaluation: sliding-window perplexity / bits per byte and lm-evaluation-harness task definitions.
Names are imported on first use."""

from __future__ import annotations

from ..lazy_exports import export_lazily

__all__ = export_lazily(__name__, {".perplexity": ("evaluate_perplexity",)})
