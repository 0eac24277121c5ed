"""Tokenizers trained from scratch, at run time: byte-level BPE, WordPiece, Unigram and SentencePiece-style BPE,
each a hand-written core with Hugging Face classes (slow and a `tokenizers` twin).

These modules are what a saved tokenizer folder needs (transformers copies the ones a class file imports, flat,
into the folder); training lives in `tinylm_hf.tokenizer_training`, which none of them imports. Names are imported
on first use (`tinylm_hf.lazy_exports`), so importing this package imports no transformers until a Hugging Face
class is used.
"""

from __future__ import annotations

from ..lazy_exports import export_lazily

__all__ = export_lazily(__name__, {
    ".bpe.core": ("BPETokenizer",),
    ".metaspace.model": ("SPACE_SYMBOL",),
    ".pretokenize": ("EOS_TOKEN",),
    ".sentencepiece_bpe.core": ("SentencePieceBPETokenizer",),
    ".bpe.tokenization_tinylm": ("TinyLMTokenizer",),
    ".bpe.tokenization_tinylm_fast": ("TinyLMTokenizerFast",),
    ".sentencepiece_bpe.tokenization_tinylm_sentencepiece_bpe": ("TinyLMSentencePieceBPETokenizer",),
    ".sentencepiece_bpe.tokenization_tinylm_sentencepiece_bpe_fast": ("TinyLMSentencePieceBPETokenizerFast",),
    ".unigram.tokenization_tinylm_unigram": ("TinyLMUnigramTokenizer",),
    ".unigram.tokenization_tinylm_unigram_fast": ("TinyLMUnigramTokenizerFast",),
    ".wordpiece.tokenization_tinylm_wordpiece": ("TinyLMWordPieceTokenizer",),
    ".wordpiece.tokenization_tinylm_wordpiece_fast": ("TinyLMWordPieceTokenizerFast",),
    ".unigram.core": ("UnigramTokenizer",),
    ".wordpiece.core": ("WordPieceTokenizer",),
})
