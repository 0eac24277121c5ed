"""WordPiece (BERT's kind): the core (`core.py`), its kernel, BERT's character classes, the `tokenizers` twin,
the Hugging Face classes, and the trainer."""
