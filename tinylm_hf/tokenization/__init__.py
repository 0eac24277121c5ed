"""Tokenizers trained from scratch, at run time: byte-level BPE, WordPiece, Unigram and SentencePiece-style BPE,
each a hand-written core with Hugging Face classes (slow and a `tokenizers` twin).

These modules are what a saved tokenizer folder needs (transformers copies the ones a class file imports, flat,
into the folder); training lives in `tinylm_hf.tokenizer_training`, which none of them imports. The training
functions listed in `__all__` (`train_bpe`, `count_words`, ...) stay importable from this package for existing
callers: they are looked up in `tinylm_hf.tokenizer_training` on first use, so importing this package imports no
training code.
"""

from .bpe import BPETokenizer
from .metaspace import SPACE_SYMBOL
from .pretokenize import EOS_TOKEN
from .sentencepiece_bpe import SentencePieceBPETokenizer
from .tokenization_tinylm import TinyLMTokenizer
from .tokenization_tinylm_fast import TinyLMTokenizerFast
from .tokenization_tinylm_sentencepiece_bpe import TinyLMSentencePieceBPETokenizer
from .tokenization_tinylm_sentencepiece_bpe_fast import TinyLMSentencePieceBPETokenizerFast
from .tokenization_tinylm_unigram import TinyLMUnigramTokenizer
from .tokenization_tinylm_unigram_fast import TinyLMUnigramTokenizerFast
from .tokenization_tinylm_wordpiece import TinyLMWordPieceTokenizer
from .tokenization_tinylm_wordpiece_fast import TinyLMWordPieceTokenizerFast
from .unigram import UnigramTokenizer
from .wordpiece import WordPieceTokenizer

# Names of tinylm_hf.tokenizer_training that this package exported before training moved there.
TRAINING_NAMES = (
    "WordCounts",
    "build_hf_tokenizer",
    "count_words",
    "load_word_counts",
    "save_word_counts",
    "split_metaspace_words",
    "sum_word_counts",
    "train_bpe",
    "train_bpe_from_counts",
    "train_bpe_from_iterator",
    "train_sentencepiece_bpe",
    "train_sentencepiece_bpe_from_counts",
    "train_sentencepiece_bpe_from_iterator",
    "train_tokenizer",
    "train_unigram",
    "train_unigram_from_counts",
    "train_unigram_from_iterator",
    "train_wordpiece",
    "train_wordpiece_from_counts",
    "train_wordpiece_from_iterator",
)


def __getattr__(name: str):
    """The training names of `TRAINING_NAMES`, from `tinylm_hf.tokenizer_training` (imported on first use)."""
    if name in TRAINING_NAMES:
        from .. import tokenizer_training

        return getattr(tokenizer_training, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "EOS_TOKEN",
    "BPETokenizer",
    "SPACE_SYMBOL",
    "SentencePieceBPETokenizer",
    "TinyLMSentencePieceBPETokenizer",
    "TinyLMSentencePieceBPETokenizerFast",
    "TinyLMTokenizer",
    "TinyLMTokenizerFast",
    "TinyLMUnigramTokenizer",
    "TinyLMUnigramTokenizerFast",
    "TinyLMWordPieceTokenizer",
    "TinyLMWordPieceTokenizerFast",
    "UnigramTokenizer",
    "WordPieceTokenizer",
    *TRAINING_NAMES,
]
