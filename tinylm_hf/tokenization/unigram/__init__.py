"""Unigram (SentencePiece's default): the core (`core.py`) over the shared SentencePiece model (`metaspace/`), the
Hugging Face classes, and the EM trainer with its seeds, lattice and lattice kernel."""
