"""The tokenizer families, one entry each: the table that training, word counting, registration, the exports
and the command line read.

A family is a way of splitting text into words, a trainer that turns their counts into a hand-written
core tokenizer (`encode` / `decode` / `save(dir)` / `load(dir)`), and the Hugging Face classes that run
that core (slow) or its `tokenizers` twin (fast). Adding a family is adding an entry here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .. import tokenization
from ..tokenization.bpe.core import BPETokenizer
from ..tokenization.pretokenize import EOS_TOKEN, PAD_TOKEN
from ..tokenization.sentencepiece_bpe.core import SentencePieceBPETokenizer
from ..tokenization.unigram.core import UnigramTokenizer
from ..tokenization.wordpiece.core import BERT_SPECIAL_TOKENS, WordPieceTokenizer
from ..tokenization.bpe.train import train_bpe_tokenizer
from ..tokenization.sentencepiece_bpe.train import SENTENCEPIECE_BPE_BYTE_FALLBACK, train_sentencepiece_bpe_tokenizer
from ..tokenization.unigram.train import UNIGRAM_FAMILY_BYTE_FALLBACK, train_unigram_tokenizer
from .word_splitting import BERT_WORDS, BPE_WORDS, METASPACE_WORDS, WordSplitter
from ..tokenization.wordpiece.train import DEFAULT_WORDPIECE_SCORE, train_wordpiece_tokenizer

# (counts: WordCounts, vocab_size, special_tokens, *, byte_fallback: bool | None, progress: bool
#  [, score: str where the family has one]) -> core tokenizer
FamilyTrainer = Callable[..., Any]


@dataclass(frozen=True)
class TokenizerFamily:
    """One tokenizer family: how it splits and trains, which classes run it, its files and defaults."""

    name: str  # what `--algorithm`, `train_tokenizer(algorithm=)` and `count_words(algorithm=)` call it
    title: str  # what it is, in a model card's words
    words: WordSplitter  # how its trainer splits text into the words it counts
    train: FamilyTrainer  # word counts -> its core tokenizer
    core: type  # the hand-written tokenizer: encode / decode / save(dir) / load(dir)
    slow_name: str  # the Hugging Face class over the core (what load_tokenizer returns), in tinylm_hf.tokenization
    fast_name: str  # the same tokenizer run by `tokenizers` (what AutoTokenizer returns)
    special_tokens: tuple[str, ...]  # trained with these unless told otherwise (a pad apart from end of text)
    byte_fallback: bool | None  # its default; None where it is no option (every input is covered without it)
    score: str | None  # its trainer's default merge rule (wordpiece: WORDPIECE_SCORES); None where there is no choice
    llama_cpp: str | None  # llama.cpp's tokenizer model in a GGUF file; None: llama.cpp has none for it

    @property
    def slow(self) -> type:
        """The Hugging Face class over the core (imported here, on first use: it loads transformers)."""
        return getattr(tokenization, self.slow_name)

    @property
    def fast(self) -> type:
        """The Hugging Face class over the `tokenizers` twin (imported on first use, as `slow`)."""
        return getattr(tokenization, self.fast_name)

    @property
    def files(self) -> tuple[str, ...]:
        """The files a saved tokenizer of this family holds besides tokenizer_config.json."""
        from ..tokenization.tokenization_tinylm_base import TOKENIZER_FILE

        return (*self.core.files, TOKENIZER_FILE)


FAMILIES: dict[str, TokenizerFamily] = {
    family.name: family
    for family in (
        TokenizerFamily(
            name="bpe", title="byte-level BPE", words=BPE_WORDS, train=train_bpe_tokenizer, core=BPETokenizer,
            slow_name="TinyLMTokenizer", fast_name="TinyLMTokenizerFast", special_tokens=(EOS_TOKEN, PAD_TOKEN),
            byte_fallback=None, score=None, llama_cpp="gpt2",
        ),
        TokenizerFamily(
            name="wordpiece", title="WordPiece", words=BERT_WORDS, train=train_wordpiece_tokenizer,
            core=WordPieceTokenizer, slow_name="TinyLMWordPieceTokenizer", fast_name="TinyLMWordPieceTokenizerFast",
            special_tokens=BERT_SPECIAL_TOKENS, byte_fallback=None, score=DEFAULT_WORDPIECE_SCORE, llama_cpp=None,
        ),
        TokenizerFamily(
            name="unigram", title="Unigram", words=METASPACE_WORDS, train=train_unigram_tokenizer,
            core=UnigramTokenizer, slow_name="TinyLMUnigramTokenizer", fast_name="TinyLMUnigramTokenizerFast",
            special_tokens=(PAD_TOKEN,), byte_fallback=UNIGRAM_FAMILY_BYTE_FALLBACK, score=None, llama_cpp="t5",
        ),
        TokenizerFamily(
            name="sentencepiece-bpe", title="SentencePiece-style BPE", words=METASPACE_WORDS,
            train=train_sentencepiece_bpe_tokenizer, core=SentencePieceBPETokenizer,
            slow_name="TinyLMSentencePieceBPETokenizer", fast_name="TinyLMSentencePieceBPETokenizerFast",
            special_tokens=(PAD_TOKEN,), byte_fallback=SENTENCEPIECE_BPE_BYTE_FALLBACK, score=None,
            llama_cpp="llama",
        ),
    )
}


def get_family(name: str) -> TokenizerFamily:
    """The `FAMILIES` entry called `name`, or a ValueError listing the known ones."""
    family = FAMILIES.get(name) if isinstance(name, str) else None
    if family is None:
        raise ValueError(f"unknown algorithm {name!r}: choose one of {', '.join(map(repr, sorted(FAMILIES)))}")
    return family

