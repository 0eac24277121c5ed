"""Train any of the four tokenizers and wrap it as a Hugging Face tokenizer: the library call behind
`tinylm train-tokenizer`.

Every source goes through word counts (`count_words`): files (counted in parallel for BPE), an
iterable of texts such as a `datasets` column (counted one text at a time), or counts summed over
shards counted elsewhere (`sum_word_counts`). Each family's trainer (`train_bpe`, ...) gives on counts exactly
what it gives on the concatenated text. The family's trainer (`families.FAMILIES`) returns its core tokenizer,
which its Hugging Face class then runs (`from_core`), all in memory.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..tokenization.bpe.core import BPETokenizer
from ..tokenization.pretokenize import PAD_TOKEN, check_special_tokens
from ..tokenization.families import TokenizerFamily, get_family
from .word_counts import WordCounts, count_words, make_word_counts

if TYPE_CHECKING:
    from ..tokenization.bpe.tokenization_tinylm import TinyLMTokenizer

MASK_TOKEN = "<|mask|>"  # becomes the mask token (masked-LM pretraining) when given


def build_hf_tokenizer(
    vocab: dict[int, bytes],
    merges: list[tuple[bytes, bytes]],
    special_tokens: list[str],
    *,
    pattern: str = "gpt2",
) -> TinyLMTokenizer:
    """A `TinyLMTokenizer` over trained `vocab`/`merges`, with every special token registered as special.

    `EOS_TOKEN` (else the first special token) becomes eos, bos and unk; `PAD_TOKEN` becomes pad when
    given, else pad is eos; `MASK_TOKEN` becomes the mask token when given (`TinyLMTokenizer.from_core`).
    """
    special_tokens = check_special_tokens(special_tokens)
    from ..tokenization.bpe.tokenization_tinylm import TinyLMTokenizer  # transformers: loaded when a tokenizer is built

    core = BPETokenizer(vocab, merges, special_tokens, pattern=pattern)  # gives missing specials their ids
    return TinyLMTokenizer.from_core(core, **named_special_tokens(special_tokens))


def named_special_tokens(special_tokens: Sequence[str]) -> dict[str, str]:
    """The roles the special tokens given take in every family: `PAD_TOKEN` is pad, `MASK_TOKEN` the mask token."""
    roles = {"pad_token": PAD_TOKEN, "mask_token": MASK_TOKEN}
    return {role: token for role, token in roles.items() if token in special_tokens}


def collect_word_counts(
    inputs: Sequence[str | os.PathLike] | Iterable[str] | WordCounts,
    *,
    algorithm: str,
    special_tokens: Sequence[str],
    pattern: str = "gpt2",
    lowercase: bool = False,
    num_workers: int | None = None,
) -> WordCounts:
    """Word counts of files (paths), texts (an iterable of str) or already counted shards (`WordCounts`)."""
    if isinstance(inputs, WordCounts):
        options = make_word_counts({}, algorithm=algorithm, pattern=pattern, lowercase=lowercase,
                                   special_tokens=special_tokens).options()
        if inputs.options() != options:
            raise ValueError(f"the word counts were made with {inputs.options()}, but training asks for {options}: "
                             "count the shards with the same --algorithm, --pattern, --lowercase and special tokens")
        if not inputs.counts:
            raise ValueError("the word counts hold no words: there is nothing to train on; count some text with "
                             "`tinylm count-words`")
        return inputs
    if isinstance(inputs, (str, os.PathLike)):
        inputs = [inputs]
    items = list(inputs) if isinstance(inputs, Sequence) else inputs
    if isinstance(items, list):
        if not items:
            raise ValueError("no input files or texts given")
        # in a list, str items are file paths (as on the command line); texts come as an iterator
        items = [Path(item) if isinstance(item, str) else item for item in items]
        for item in items:
            if isinstance(item, os.PathLike) and not os.path.isfile(item):
                raise FileNotFoundError(f"input file {os.fspath(item)} does not exist")
    counts = count_words(items, algorithm=algorithm, special_tokens=special_tokens, pattern=pattern, lowercase=lowercase,
                         num_workers=num_workers)
    if not counts:
        raise ValueError("the input holds no text to train on (empty, or only special tokens)")
    return make_word_counts(counts, algorithm=algorithm, pattern=pattern, lowercase=lowercase,
                            special_tokens=special_tokens)


def train_tokenizer(
    inputs: Sequence[str | os.PathLike] | Iterable[str] | WordCounts,
    vocab_size: int,
    special_tokens: Sequence[str] | None = None,
    *,
    algorithm: str = "bpe",
    pattern: str = "gpt2",
    lowercase: bool = False,
    byte_fallback: bool | None = None,
    num_workers: int | None = None,
    progress: bool = True,
    wordpiece_score: str | None = None,
) -> Any:
    """Train `algorithm` on `inputs` and return its Hugging Face tokenizer (save it with `save_pretrained`).

    Args:
        inputs: a list of text files, an iterator of texts (e.g. a `datasets` column), or `WordCounts`
            (e.g. `sum_word_counts([...])` over shards counted with `count_words`).
        special_tokens: default the family's: `<|endoftext|>` and `<|pad|>` for bpe, BERT's five for
            wordpiece, `<|pad|>` for the sentencepiece-style algorithms (they always have `<unk>`, `<s>`,
            `</s>`). `<|pad|>` (`PAD_TOKEN`) becomes the pad token; without it bpe pads with its eos and
            the sentencepiece-style families have no pad token.
        pattern: the pre-tokenization regex of bpe ("gpt2", "gpt4" or a regex).
        lowercase: lower-case and strip accents (wordpiece, as BERT's uncased models).
        byte_fallback: sentencepiece-bpe and unigram: characters no piece covers (newlines among them)
            become `<0x..>` byte tokens, not `<unk>` (default: on for both; sentencepiece's Unigram
            default, and llama.cpp's Unigram tokenizer for export-gguf, need False).
        num_workers: processes counting each large file (bpe; default: the CPU count).
        wordpiece_score: wordpiece's merge rule, "frequency" (default, as `tokenizers`), "likelihood"
            (Schuster & Nakajima) or "pmi" (freq(ab) / (freq(a) * freq(b)), the course's rule).
    """
    family = get_family(algorithm)
    options = _score_option(family, wordpiece_score)
    specials = _check_outer_whitespace(check_special_tokens(list(family.special_tokens if special_tokens is None else special_tokens)))
    record = collect_word_counts(inputs, algorithm=algorithm, special_tokens=specials, pattern=pattern,
                                 lowercase=lowercase, num_workers=num_workers)
    byte_fallback = family.byte_fallback if byte_fallback is None else byte_fallback
    core = family.train(record, vocab_size, specials, byte_fallback=byte_fallback, progress=progress, **options)
    return _check_mask_role(family.slow.from_core(core, **named_special_tokens(specials)))


def _check_outer_whitespace(special_tokens: list[str]) -> list[str]:
    """`special_tokens`, unless one starts or ends with whitespace (Hugging Face's added tokens strip it, so the
    token would land on an id of the vocabulary)."""
    for token in special_tokens:
        if token != token.strip():
            raise ValueError(f"special token {token!r} starts or ends with whitespace, which a tokenizer cannot keep "
                             "apart from ordinary text: name a token without outer whitespace, e.g. '<|sep|>'")
    return special_tokens


def _check_mask_role(tokenizer: Any) -> Any:
    """`tokenizer`, unless its mask token also took the eos, pad, bos or unk role (it was the only special token)."""
    roles = [role for role in ("eos", "pad", "bos", "unk") if tokenizer.mask_token is not None
             and getattr(tokenizer, f"{role}_token") == tokenizer.mask_token]
    if roles:
        raise ValueError(f"{MASK_TOKEN!r} would be the {'/'.join(roles)} token as well as the mask token, so every "
                         f"document boundary would read as a mask: add it to the default special tokens with "
                         f"--masked-lm, or name an end-of-text token first (--special-token '<|endoftext|>')")
    return tokenizer


def _score_option(family: TokenizerFamily, wordpiece_score: str | None) -> dict[str, str]:
    """The `score=` a family's trainer takes (checked before counting), or nothing where it has no choice."""
    if family.score is None:
        if wordpiece_score is not None:
            raise ValueError(f"a WordPiece score applies to algorithm 'wordpiece' only, not {family.name!r}: "
                             "drop --wordpiece-score")
        return {}
    return {"score": family.check_score(family.score if wordpiece_score is None else wordpiece_score)}
