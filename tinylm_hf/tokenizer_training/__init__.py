"""Tokenizer training over the families: word counting from files, iterables and `datasets` (`word_counts`), and
`train_tokenizer` (word counts -> a family's trainer -> its Hugging Face tokenizer). Each family's trainer lives in
its folder of `tinylm_hf.tokenization`; `tinylm_hf.tokenization` imports nothing from here, and a saved folder
carries none of it (`save_pretrained` writes only the import closure of the folder's classes). Names are imported
on first use.
"""

from __future__ import annotations

from ..lazy_exports import export_lazily

__all__ = export_lazily(__name__, {
    "..tokenization.bpe.train": ("train_bpe",),
    "..tokenization.metaspace.train": ("split_metaspace_words",),
    "..tokenization.sentencepiece_bpe.train": ("train_sentencepiece_bpe",),
    ".train_tokenizer": ("build_hf_tokenizer", "train_tokenizer"),
    "..tokenization.unigram.train": ("train_unigram",),
    ".word_counts": ("WordCounts", "count_words", "load_word_counts", "save_word_counts", "sum_word_counts"),
    "..tokenization.wordpiece.train": ("train_wordpiece",),
})
