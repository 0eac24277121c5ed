"""Byte-level BPE training: pre-token counts, then incremental merges.

`train_bpe` counts the pre-tokens of a text file (over threads, `pretoken_counts`) or of texts, or takes
such counts, and learns merges from them. Vocabulary ids: 0..255 are the
single bytes, then the special tokens in the given order, then one id per merge in merge order.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

import numpy as np

from .core import BPETokenizer
from ..pretokenize import check_special_tokens, resolve_pattern
from .merges import learn_merges
from ..pair_merges import progress_bar
from ..pretoken_counts import SpanCounts, as_spans, count_pretoken_bytes
from ..training_source import TrainingSource, read_training_source
from ..word_splitting import BPE_WORDS, WordCounts, count_split_words, iter_texts

def train_bpe(
    input_path: TrainingSource,
    vocab_size: int,
    special_tokens: Sequence[str] | None,
    *,
    num_workers: int | None = None,
    pattern: str = "gpt2",
    progress: bool = True,
) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    """Train a byte-level BPE; return (vocab id -> bytes, merges in order).

    `input_path` is a UTF-8 text file (a `str` or `os.PathLike`), pre-token counts (a `Mapping`) or an iterable
    of texts (a list, a generator, a `datasets` column). Special tokens are cut out of the text before
    pre-tokenization, so no merge crosses one. A file that is not UTF-8 (binary, Latin-1) is a ValueError naming
    the byte offset, as in every family. `num_workers` (a file only) defaults to the CPU count; it is the number
    of threads counting pre-tokens (the merge loop runs on one).

    Texts are counted one at a time (memory grows with the distinct pre-tokens, not the data); each text is
    pre-tokenized on its own. Equal to training on the texts joined, when every text ends where a pre-token
    ends (e.g. texts that end in a special token or a newline before a letter).

    Count keys are pre-tokens as `str` (encoded to UTF-8) or as raw `bytes`; both may be mixed and equal
    byte strings are summed. Values are occurrence counts (zeros are ignored). The result is identical to
    training on a file whose pre-tokens have these counts.

    >>> vocab, merges = train_bpe({"ab": 2, "abc": 1, "az": 1}, 259, [], progress=False)
    >>> merges  # (ab, c) and (a, z) tie at 1: the greater pair of bytes wins
    [(b'a', b'b'), (b'ab', b'c'), (b'a', b'z')]
    """
    specials = check_special_tokens(special_tokens)
    _check_vocab_size(vocab_size, specials)
    spans = read_training_source(
        input_path,
        count_file=lambda path: count_pretoken_bytes(path, specials, resolve_pattern(pattern), num_workers=num_workers),
        count_texts=lambda texts: _byte_spans(count_split_words(iter_texts(texts), BPE_WORDS, special_tokens=specials,
                                                                pattern=pattern)),
        check_counts=_byte_spans,
        nothing="text outside the special tokens",
        size=lambda spans: len(spans[2]),
        counts_may_be_empty=True,
    )
    return _train_from_words(*spans, vocab_size, specials, progress=progress)


def _byte_spans(counts: Mapping[str | bytes, int]) -> SpanCounts:
    """Pre-token counts (`str` or `bytes` keys, summed where their bytes are equal) as the merge loop's spans."""
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
    return as_spans(merged)  # the merge loop's arrays: `merged` is freed, a large corpus's counts are not held twice


def train_bpe_tokenizer(counts: WordCounts, vocab_size: int, special_tokens: Sequence[str], *,
                        byte_fallback: bool | None = None, progress: bool = False) -> BPETokenizer:
    """The byte-level BPE family's trainer: a `BPETokenizer` learned from BPE word counts (`count_words`).

    Every byte has a token, so `byte_fallback` is no option here (it is ignored).
    """
    vocab, merges = train_bpe(counts.counts, vocab_size, special_tokens, progress=progress)
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
