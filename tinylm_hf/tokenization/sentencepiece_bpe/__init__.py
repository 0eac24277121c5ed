"""SentencePiece-style BPE (Llama 2's kind): the core (`core.py`) over the shared SentencePiece model (`metaspace/`),
the Hugging Face classes, and the trainer."""
