"""Byte-level BPE (GPT-2's kind): the core (`core.py`), its encode kernel beside the reference, GPT-2's files,
the `tokenizers` twin, the Hugging Face classes, and the trainer with its merge loop."""
