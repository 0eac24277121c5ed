"""The TinyLM model: config, hand-written layers, and the transformers model classes."""

from .configuration_tinylm import TinyLMConfig

__all__ = ["TinyLMConfig"]
