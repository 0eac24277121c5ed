"""What the two SentencePiece-style families (Unigram, SentencePiece BPE) share: the `tokenizer.model` file
(`model.py`), the core over it, the `tokenizers` twin, the Hugging Face base class and the common trainer steps."""
