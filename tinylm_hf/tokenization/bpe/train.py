"""Byte-level BPE training: pre-token counts, then incremental merges.

`train_bpe` counts the pre-tokens of a text file (over threads, `pretoken_counts`), and
`train_bpe_from_counts` learns merges from such counts. Vocabulary ids: 0..255 are the
single bytes, then the special tokens in the given order, then one id per merge in merge order.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from .core import BPETokenizer
from ..pretokenize import check_special_tokens, resolve_pattern
from .merges import learn_merges
from ..pair_merges import progress_bar
from ..pretoken_counts import as_spans, count_pretoken_bytes
from ..word_splitting import BPE_WORDS, WordCounts, count_split_words, iter_texts

def train_bpe(
    input_path: str | os.PathLike,
    vocab_size: int,
    special_tokens: Sequence[str] | None,
    *,
    num_workers: int | None = None,
    pattern: str = "gpt2",
    progress: bool = True,
) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    """Train a byte-level BPE on a UTF-8 text file; return (vocab id -> bytes, merges in order).

    Special tokens are cut out of the text before pre-tokenization, so no merge crosses one.
    A file that is not UTF-8 (binary, Latin-1) is a ValueError naming the byte offset, as in every family. `num_workers` defaults to the CPU count;
    it is the number of threads counting pre-tokens (the merge loop runs on one).
    """
    specials = check_special_tokens(special_tokens)
    _check_vocab_size(vocab_size, specials)
    path = os.fspath(input_path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"training file not found: {path!r}")
    size = os.path.getsize(path)
    if size == 0:
        raise ValueError(f"training file {path!r} is empty")
    resolved = resolve_pattern(pattern)
    symbols, lengths, counts = count_pretoken_bytes(path, specials, resolved, num_workers=num_workers)
    if not len(counts):
        raise ValueError(f"training file {path!r} holds no text outside the special tokens")
    return _train_from_words(symbols, lengths, counts, vocab_size, specials, progress=progress)


def train_bpe_from_counts(
    counts: Mapping[str | bytes, int],
    vocab_size: int,
    special_tokens: Sequence[str] | None,
    *,
    progress: bool = False,
) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    """Learn merges from pre-token counts computed elsewhere (shards, other machines).

    Keys are pre-tokens as `str` (encoded to UTF-8) or as raw `bytes`; both may be mixed and equal
    byte strings are summed. Values are occurrence counts (zeros are ignored). The result is
    identical to `train_bpe` on a file whose pre-tokens have these counts.

    >>> vocab, merges = train_bpe_from_counts({"ab": 2, "abc": 1, "az": 1}, 259, [])
    >>> merges  # (ab, c) and (a, z) tie at 1: the greater pair of bytes wins
    [(b'a', b'b'), (b'ab', b'c'), (b'a', b'z')]
    """
    specials = check_special_tokens(special_tokens)
    _check_vocab_size(vocab_size, specials)
    if not isinstance(counts, Mapping):
        raise TypeError(f"counts must be a mapping of pre-token -> count, got {type(counts).__name__}")
    merged: Counter[bytes] = Counter()
    for token, count in counts.items():
        if isinstance(token, str):
            token = token.encode("utf-8")
        elif not isinstance(token, bytes):
            raise TypeError(f"pre-token keys must be str or bytes, got {token!r}")
        if not isinstance(count, int) or count < 0:
            raise ValueError(f"count of pre-token {token!r} must be a non-negative int, got {count!r}")
        if count and token:
            merged[token] += count
    spans = as_spans(merged)
    del merged  # the merge loop's arrays take its place: a large corpus's counts are not held twice
    return _train_from_words(*spans, vocab_size, specials, progress=progress)


def train_bpe_from_iterator(
    iterator: Iterable[str],
    vocab_size: int,
    special_tokens: Sequence[str] | None,
    *,
    pattern: str = "gpt2",
    progress: bool = True,
) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    """Train a byte-level BPE on an iterable of texts (a list, a generator, a `datasets` column).

    Texts are counted one at a time (memory grows with the distinct pre-tokens, not the data); each
    text is pre-tokenized on its own. Equal to `train_bpe` on the texts joined, when every text ends
    where a pre-token ends (e.g. texts that end in a special token or a newline before a letter).
    """
    specials = check_special_tokens(special_tokens)
    _check_vocab_size(vocab_size, specials)
    counts = count_split_words(iter_texts(iterator), BPE_WORDS, special_tokens=specials, pattern=pattern)
    if not counts:
        raise ValueError("the iterator gave no text outside the special tokens")
    return train_bpe_from_counts(counts, vocab_size, specials, progress=progress)


def train_bpe_tokenizer(counts: WordCounts, vocab_size: int, special_tokens: Sequence[str], *,
                        byte_fallback: bool | None = None, progress: bool = False) -> BPETokenizer:
    """The byte-level BPE family's trainer: a `BPETokenizer` learned from BPE word counts (`count_words`).

    Every byte has a token, so `byte_fallback` is no option here (it is ignored).
    """
    vocab, merges = train_bpe_from_counts(counts.counts, vocab_size, special_tokens, progress=progress)
    return BPETokenizer(vocab, merges, list(special_tokens), pattern=counts.pattern or "gpt2")


def _check_vocab_size(vocab_size: int, specials: list[str]) -> None:
    if not isinstance(vocab_size, int) or isinstance(vocab_size, bool):
        raise TypeError(f"vocab_size must be an int, got {vocab_size!r}")
    minimum = 256 + len(specials)
    if vocab_size < minimum:
        raise ValueError(
            f"vocab_size={vocab_size} is too small: it must be at least 256 bytes + "
            f"{len(specials)} special tokens = {minimum}"
        )


def _train_from_words(symbols: np.ndarray, lengths: np.ndarray, counts: np.ndarray, vocab_size: int,
                      specials: list[str], *, progress: bool) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    """Merges learned from words (distinct pre-tokens: UTF-8 `symbols` back to back, cut by `lengths`, counted `counts`)."""
    # 1. Vocabulary: bytes, then specials; merged tokens are appended in merge order.
    token_bytes = [bytes([i]) for i in range(256)] + [s.encode("utf-8") for s in specials]
    num_merges = vocab_size - len(token_bytes)
    bar = progress_bar(num_merges, progress, "BPE merges")
    # 2. Merges (`bpe_merges`: a single byte holds no pair, so it takes no part).
    pairs = learn_merges(symbols, lengths, counts, token_bytes, num_merges)
    if bar is not None:
        bar.update(len(pairs))
        bar.close()
    merges = [(token_bytes[left], token_bytes[right]) for left, right in pairs]
    return dict(enumerate(token_bytes)), merges
