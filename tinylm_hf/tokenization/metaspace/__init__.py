"""What the two SentencePiece-style families (Unigram, SentencePiece BPE) share: the `tokenizer.model` file
(`sentencepiece_model.py`), the core over it (`core.py`), the `tokenizers` twin, the Hugging Face base class
and the common trainer steps."""
