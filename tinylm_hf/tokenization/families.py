"""The tokenizer families, one entry each: the table that training, word counting, registration, loading, the
exports and the command line read.

A family is a folder of `tinylm_hf.tokenization` (its hand-written core: `encode` / `decode` / `save(dir)` /
`load(dir)`, its Hugging Face classes, slow over the core and fast over its `tokenizers` twin, and its trainer,
word counts -> core) plus its entry here. The entry names the trainer and the word splitter by module path,
imported on first use: registration, loading and publishing read this table and import no trainer.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .bpe.core import BPETokenizer
from .pretokenize import EOS_TOKEN, PAD_TOKEN
from .sentencepiece_bpe.core import SentencePieceBPETokenizer
from .unigram.core import UnigramTokenizer
from .wordpiece.core import BERT_SPECIAL_TOKENS, WordPieceTokenizer

# (counts: WordCounts, vocab_size, special_tokens, *, byte_fallback: bool | None, progress: bool
#  [, score: str where the family has one]) -> core tokenizer
FamilyTrainer = Callable[..., Any]
WORD_SPLITTERS = "tinylm_hf.tokenization.word_splitting"  # where the `words` splitters live


@dataclass(frozen=True)
class TokenizerFamily:
    """One tokenizer family: how it splits and trains, which classes run it, its files and defaults."""

    name: str  # what `--algorithm`, `train_tokenizer(algorithm=)` and `count_words(algorithm=)` call it
    title: str  # what it is, in a model card's words
    splitter: str  # how its trainer splits text into the words it counts: a `WordSplitter` in WORD_SPLITTERS
    trainer: str  # "module:function" of its trainer, word counts -> its core tokenizer
    core: type  # the hand-written tokenizer: encode / decode / save(dir) / load(dir)
    slow_name: str  # the Hugging Face class over the core (what load_tokenizer returns), in tinylm_hf.tokenization
    fast_name: str  # the same tokenizer run by `tokenizers` (what AutoTokenizer returns)
    special_tokens: tuple[str, ...]  # trained with these unless told otherwise (a pad apart from end of text)
    byte_fallback: bool | None  # its default; None where it is no option (every input is covered without it)
    score: str | None  # its trainer's default merge rule (wordpiece: WORDPIECE_SCORES); None where there is no choice
    score_check: str | None  # "module:function" that returns a valid score or raises ValueError; None with no score
    llama_cpp: str | None  # llama.cpp's tokenizer model in a GGUF file; None: llama.cpp has none for it
    llama_cpp_byte_pieces: bool  # whether that llama.cpp tokenizer reads byte-fallback pieces (<0x41>)
    word_marker: str  # what begins a token string at a word boundary in its vocabulary ("Ġ", "▁"; "##" continues)
    word_marker_continues: bool  # the marker continues a word (WordPiece's "##") instead of starting one
    word_style: str  # the name of its word-boundary rule (families with one vocabulary form share it)
    word_rule: str  # "module:function": token strings -> (starts a word, ends a line), what masked-LM masking reads

    @property
    def words(self) -> Any:
        """The `WordSplitter` its trainer counts words with (imported on first use: training code)."""
        return getattr(importlib.import_module(WORD_SPLITTERS), self.splitter)

    @property
    def train(self) -> FamilyTrainer:
        """Its trainer, word counts -> core tokenizer (imported on first use: training code)."""
        module, _, function = self.trainer.partition(":")
        return getattr(importlib.import_module(module), function)

    def word_boundaries(self, tokens: list[str | None], tokenizer: Any) -> tuple[list[bool], list[bool]]:
        """Per token string: (starts a word, ends with a line break), by its family's `word_rule`."""
        module, _, function = self.word_rule.partition(":")
        return getattr(importlib.import_module(module), function)(tokens, tokenizer)

    def check_score(self, score: str) -> str:
        """`score` if its trainer has that merge rule, else a ValueError listing them (before any word is counted)."""
        module, _, function = (self.score_check or "").partition(":")
        return getattr(importlib.import_module(module), function)(score)

    @property
    def slow(self) -> type:
        """The Hugging Face class over the core (imported here, on first use: it loads transformers)."""
        return getattr(importlib.import_module(__package__), self.slow_name)

    @property
    def fast(self) -> type:
        """The Hugging Face class over the `tokenizers` twin (imported on first use, as `slow`)."""
        return getattr(importlib.import_module(__package__), self.fast_name)

    @property
    def files(self) -> tuple[str, ...]:
        """The files a saved tokenizer of this family holds besides tokenizer_config.json."""
        from .tokenization_tinylm_base import TOKENIZER_FILE

        return (*self.core.files, TOKENIZER_FILE)


FAMILIES: dict[str, TokenizerFamily] = {
    family.name: family
    for family in (
        TokenizerFamily(
            name="bpe", title="byte-level BPE", splitter="BPE_WORDS", core=BPETokenizer,
            trainer="tinylm_hf.tokenization.bpe.train:train_bpe_tokenizer",
            slow_name="TinyLMTokenizer", fast_name="TinyLMTokenizerFast", special_tokens=(EOS_TOKEN, PAD_TOKEN),
            byte_fallback=None, score=None, score_check=None, llama_cpp="gpt2", llama_cpp_byte_pieces=False,
            word_marker="Ġ", word_marker_continues=False, word_style="byte_level",
            word_rule="tinylm_hf.tokenization.bpe.byte_unicode:word_boundaries",
        ),
        TokenizerFamily(
            name="wordpiece", title="WordPiece", splitter="BERT_WORDS",
            trainer="tinylm_hf.tokenization.wordpiece.train:train_wordpiece_tokenizer",
            core=WordPieceTokenizer, slow_name="TinyLMWordPieceTokenizer", fast_name="TinyLMWordPieceTokenizerFast",
            special_tokens=BERT_SPECIAL_TOKENS, byte_fallback=None, score="frequency",
            score_check="tinylm_hf.tokenization.wordpiece.train:check_wordpiece_score", llama_cpp=None,
            llama_cpp_byte_pieces=False, word_marker="##", word_marker_continues=True, word_style="wordpiece",
            word_rule="tinylm_hf.tokenization.wordpiece.core:word_boundaries",
        ),
        TokenizerFamily(
            name="unigram", title="Unigram", splitter="METASPACE_WORDS",
            trainer="tinylm_hf.tokenization.unigram.train:train_unigram_tokenizer",
            core=UnigramTokenizer, slow_name="TinyLMUnigramTokenizer", fast_name="TinyLMUnigramTokenizerFast",
            special_tokens=(PAD_TOKEN,), byte_fallback=True, score=None, score_check=None, llama_cpp="t5",
            llama_cpp_byte_pieces=False, word_marker="▁", word_marker_continues=False, word_style="sentencepiece",
            word_rule="tinylm_hf.tokenization.metaspace.core:word_boundaries",
        ),
        TokenizerFamily(
            name="sentencepiece-bpe", title="SentencePiece-style BPE", splitter="METASPACE_WORDS",
            trainer="tinylm_hf.tokenization.sentencepiece_bpe.train:train_sentencepiece_bpe_tokenizer",
            core=SentencePieceBPETokenizer,
            slow_name="TinyLMSentencePieceBPETokenizer", fast_name="TinyLMSentencePieceBPETokenizerFast",
            special_tokens=(PAD_TOKEN,), byte_fallback=True, score=None, score_check=None, llama_cpp="llama",
            llama_cpp_byte_pieces=True, word_marker="▁", word_marker_continues=False, word_style="sentencepiece",
            word_rule="tinylm_hf.tokenization.metaspace.core:word_boundaries",
        ),
    )
}


def get_family(name: str) -> TokenizerFamily:
    """The `FAMILIES` entry called `name`, or a ValueError listing the known ones."""
    family = FAMILIES.get(name) if isinstance(name, str) else None
    if family is None:
        raise ValueError(f"unknown algorithm {name!r}: choose one of {', '.join(map(repr, sorted(FAMILIES)))}")
    return family


def vocabulary_family(tokenizer: Any, tokens: list[str | None]) -> TokenizerFamily:
    """The family whose vocabulary form `tokenizer` (any Hugging Face tokenizer; `tokens`: its token strings) has.

    A TinyLM class is its family's; a `tokenizers` backend whose model continues words with a family's marker is
    that family's (BERT's WordPiece); otherwise the family whose marker most token strings begin with (a marker that
    continues words wins a tie: with no marker at all, every token starts a word).
    """
    name = type(tokenizer).__name__
    for family in FAMILIES.values():
        if name in (family.slow_name, family.fast_name):
            return family
    model = getattr(getattr(tokenizer, "backend_tokenizer", None), "model", None)
    prefix = getattr(model, "continuing_subword_prefix", None)
    for family in FAMILIES.values():
        if family.word_marker_continues and prefix == family.word_marker:
            return family
    present = [t for t in tokens if t]
    return max(FAMILIES.values(), key=lambda f: (sum(t.startswith(f.word_marker) for t in present),
                                                 f.word_marker_continues))
