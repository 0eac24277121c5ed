"""Evaluation: sliding-window perplexity / bits per byte and lm-evaluation-harness task definitions."""

from .perplexity import evaluate_perplexity

__all__ = ["evaluate_perplexity"]
