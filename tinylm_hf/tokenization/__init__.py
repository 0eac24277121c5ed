"""Tokenizers trained from scratch: byte-level BPE, WordPiece, Unigram and SentencePiece-style BPE, one folder each
(a hand-written core, its kernels, its trainer, and its Hugging Face classes: slow, and a `tokenizers` twin), the
family table (`families`), and what the families share (pre-tokenization, the JIT helpers, word splitting, the merge
loop's pair bookkeeping, templates, atomic files).

A saved folder carries only the import closure of its classes, written flat by `save_pretrained`
(`tinylm_hf.remote_code`): no trainer. Names are imported on first use (`tinylm_hf.lazy_exports`), so importing
this package imports no transformers until a Hugging Face class is used.
"""

from __future__ import annotations

from ..lazy_exports import export_lazily

__all__ = export_lazily(__name__, {
    ".bpe.core": ("BPETokenizer",),
    ".metaspace.sentencepiece_model": ("SPACE_SYMBOL",),
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
