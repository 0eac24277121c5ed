"""Counting the pre-tokens of a text file for byte-level BPE training, over threads.

The file is cut into chunks where no cut changes its pre-tokens (at a special token, or at a safe cut of the
pre-tokenizer's, `find_safe_cut`, in bytes: after a newline between two plain bytes, or before a space after a plain
byte; whichever comes first, so a file without its special tokens, or one long line, is still cut); threads count
the chunks (read, drop special tokens, count) and each chunk's counts are added to one running total, so memory
stays bounded by the chunks in flight and the distinct pre-tokens. GPT-2's and cl100k's patterns are counted by
kernels that release the GIL: the encoder's scanner (`bpe_kernels.pretoken_bounds`) finds the pre-tokens in
one pass over the UTF-8 bytes, and `pretoken_counts_kernels.count_spans` counts equal spans in a hash table
keyed by their bytes (`add_spans` adds a chunk's to the total); without numba, and for other patterns, `regex` and
`Counter` count them (the reference). The span helpers here (`texts_as_bytes`, `sum_span_counts`,
`spans_to_counter`) serve sentencepiece's word counting too (`metaspace/train.py`).
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from functools import partial
from typing import BinaryIO

import numpy as np

from .jit import kernels_enabled, map_in_threads, resolve_workers
from .pretokenize import GPT2_PATTERN, GPT4_PATTERN, compile_pretokenizer, split_on_special_tokens

# Target chunk size: bounds a thread's memory (the chunk's text, its UTF-8 bytes and pre-token bounds, some 20
# bytes a byte).
CHUNK_BYTES = 1 << 20
# Spans turned into strings at a time by `spans_to_counter`.
SPANS_PER_SLICE = 1 << 20
# Block size used when searching forward for a chunk boundary.
SEARCH_BLOCK_BYTES = 1 << 12
# Safe cuts (`pretokenize.has_safe_cuts`) in bytes, at a match's end: just after a newline between two plain
# (non-space ASCII) bytes, or just before a space after a plain byte. No cut there changes a pre-token.
_SAFE_CUT = re.compile(rb"[\x21-\x7e](?:\n(?=[\x21-\x7e])|(?= ))")

# Distinct pre-tokens as spans: (their UTF-8 bytes back to back, their lengths in bytes, their counts).
SpanCounts = tuple[np.ndarray, np.ndarray, np.ndarray]


def count_pretokens(
    path: str,
    special_tokens: Sequence[str],
    pattern: str,
    *,
    num_workers: int | None = None,
) -> Counter[str]:
    """Count the pre-tokens of a file (pre-token -> count), with special tokens removed, over `num_workers` threads."""
    counts = _count_file(path, special_tokens, pattern, num_workers)
    return counts if isinstance(counts, Counter) else spans_to_counter(counts)


def count_pretoken_bytes(
    path: str,
    special_tokens: Sequence[str],
    pattern: str,
    *,
    num_workers: int | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`count_pretokens` as arrays, for the BPE trainer: (the distinct pre-tokens' UTF-8 bytes back to back,
    their lengths in bytes, their counts); no string per pre-token is made on the kernel path."""
    counts = _count_file(path, special_tokens, pattern, num_workers)
    return as_spans({word.encode("utf-8"): n for word, n in counts.items()}) if isinstance(counts, Counter) else counts


def as_spans(counts: Mapping[bytes, int]) -> SpanCounts:
    """Counts of byte strings as `SpanCounts`."""
    lengths = np.fromiter(map(len, counts), dtype=np.int64, count=len(counts))
    return np.frombuffer(b"".join(counts), dtype=np.uint8), lengths, np.fromiter(counts.values(), dtype=np.int64,
                                                                                  count=len(counts))


def _count_file(path: str, special_tokens: Sequence[str], pattern: str,
                num_workers: int | None) -> Counter[str] | SpanCounts:
    """A file's pre-token counts: a `Counter` by the reference, `SpanCounts` by the kernels (GPT-2's, cl100k's
    pattern)."""
    num_workers = resolve_workers(num_workers)
    size = os.path.getsize(path)
    bounds = find_chunk_boundaries(path, max(1, -(-size // CHUNK_BYTES)), special_tokens, pattern)
    ranges = list(zip(bounds, bounds[1:]))
    read = partial(_read_range, path, list(special_tokens))
    if pattern not in (GPT2_PATTERN, GPT4_PATTERN) or not kernels_enabled():
        finder = compile_pretokenizer(pattern).findall
        count = lambda r: Counter(piece for part in read(r) for piece in finder(part, concurrent=True))  # noqa: E731
        totals: Counter[str] = Counter()
        for counts in map_in_threads(count, ranges, num_workers):
            totals.update(counts)
        return totals
    gpt4 = pattern == GPT4_PATTERN
    return sum_span_counts(map_in_threads(lambda r: _count_spans(read(r), gpt4), ranges, num_workers))


def sum_span_counts(parts: Iterable[SpanCounts]) -> SpanCounts:
    """The sum of chunks' span counts, as they come: each is added to one table of the distinct spans (bytes, no
    strings), so memory holds that table and the chunk in hand."""
    from .pretoken_counts_kernels import add_spans, empty_span_table

    table = empty_span_table()
    for data, lengths, counts in parts:
        ends = np.cumsum(lengths)
        table = add_spans(*table, data, ends - lengths, ends, counts)
    *_, lengths, counts, store, distinct, stored = table
    # copies of exact size, so that the table's room to grow is freed before the spans become strings
    return store[:stored].copy(), lengths[:distinct].copy(), counts[:distinct].copy()


def _count_spans(texts: list[str], gpt4: bool) -> SpanCounts:
    """The distinct GPT-2 (cl100k when `gpt4`) pre-tokens of the texts, as spans of bytes, with their counts."""
    from .bpe.kernels import pretoken_bounds
    from .pretoken_counts_kernels import count_spans

    data, bounds = texts_as_bytes(texts)
    starts, ends = pretoken_bounds(data, bounds, gpt4)
    return count_spans(data, starts, ends, np.ones(len(starts), dtype=np.int64))


def texts_as_bytes(texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """The texts' UTF-8 bytes back to back, and the offsets [0, ..., len] where each text starts and ends."""
    pieces = [text.encode("utf-8", "surrogatepass") for text in texts]  # a lone surrogate stays one character
    bounds = np.zeros(len(pieces) + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, pieces), dtype=np.int64, count=len(pieces)), out=bounds[1:])
    return np.frombuffer(b"".join(pieces), dtype=np.uint8), bounds


def spans_to_counter(spans: SpanCounts, prefix: str = "") -> Counter[str]:
    """The counts of `spans` by their text, each with `prefix` in front (made a slice at a time: no list of all the
    spans' offsets or counts beside the table)."""
    data, lengths, counts = spans
    raw = memoryview(data)  # decoded in place: no copy of the bytes
    ends = np.cumsum(lengths)
    counter: Counter[str] = Counter()
    for first in range(0, len(lengths), SPANS_PER_SLICE):
        part = slice(first, first + SPANS_PER_SLICE)
        bounds = zip((ends[part] - lengths[part]).tolist(), ends[part].tolist())
        words = (prefix + str(raw[a:b], "utf-8", "surrogatepass") for a, b in bounds)
        dict.update(counter, zip(words, counts[part].tolist()))  # in place: `Counter(dict(...))` held two tables
    return counter


def find_chunk_boundaries(
    path: str, num_chunks: int, special_tokens: Sequence[str], pattern: str
) -> list[int]:
    """Byte offsets [0, ..., size] cutting the file where pre-tokenization cannot be changed.

    A boundary is the first cut at or after an even split point: the start of a special token, or, for
    the built-in patterns, a safe cut (`_SAFE_CUT`: both patterns end and start a pre-token there; a special
    token covering it moves the cut to its start). With neither the file is one chunk. The search reads small blocks, never the whole file.
    """
    size = os.path.getsize(path)
    safe = pattern in (GPT2_PATTERN, GPT4_PATTERN)
    if not special_tokens and not safe:
        return [0, size]
    needles = sorted({token.encode("utf-8") for token in special_tokens}, key=len)
    cuts = [b"(?P<special>" + b"|".join(map(re.escape, needles)) + b")"] if needles else []
    cut_at = re.compile(b"|".join(cuts + ([b"(?P<safe>" + _SAFE_CUT.pattern + b")"] if safe else [])))
    bounds = [0]
    with open(path, "rb") as handle:
        for k in range(1, num_chunks):
            cut = _search_forward(handle, max(size * k // num_chunks, bounds[-1]), size, cut_at, needles)
            if cut >= size:
                break  # no cut after this split point, so none after the later ones
            if needles:
                cut = _start_of_covering_special(handle, cut, needles)
            if cut > bounds[-1]:
                bounds.append(cut)
    bounds.append(size)
    return bounds


def _search_forward(handle: BinaryIO, position: int, size: int, cut_at: re.Pattern, needles: list[bytes]) -> int:
    """Offset of the first cut at or after `position` (or `size` when there is none): the start of a special
    token, or the end of a safe cut."""
    overlap = max([2, *map(len, needles)])  # a match that starts in a block ends in its overlap
    while position < size:
        handle.seek(position)
        found = cut_at.search(handle.read(SEARCH_BLOCK_BYTES + overlap))
        if found:
            return position + (found.start() if found.lastgroup == "special" else found.end())
        position += SEARCH_BLOCK_BYTES
    return size


def _start_of_covering_special(handle: BinaryIO, cut: int, needles: list[bytes]) -> int:
    """Move a cut back to the start of a longer special token that covers it ("A<|x|>" vs "<|x|>")."""
    start = max(cut - len(needles[-1]) + 1, 0)
    handle.seek(start)
    window = handle.read(cut - start + len(needles[-1]))
    best = cut
    for needle in needles:
        index = window.find(needle)
        while 0 <= index and start + index < best:
            if start + index + len(needle) > cut:
                best = start + index
                break
            index = window.find(needle, index + 1)
    return best


def _read_range(path: str, special_tokens: list[str], byte_range: tuple[int, int]) -> list[str]:
    """One chunk of the file, as the texts between its special tokens."""
    start, end = byte_range
    with open(path, "rb") as handle:
        handle.seek(start)
        data = handle.read(end - start)
    try:  # chunks start and end at plain ASCII bytes, so a strict decode never cuts a character
        text = data.decode("utf-8-sig" if start == 0 else "utf-8")  # a leading byte-order mark is no text
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path!r} is not UTF-8 (bad byte near offset {start + exc.start}); "
                         "re-encode it as UTF-8") from None
    return [part for part in split_on_special_tokens(text, special_tokens) if part]
