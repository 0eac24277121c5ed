"""Counting the pre-tokens of a text file for byte-level BPE training, over worker processes.

The file is cut into chunks where no cut changes its pre-tokens (at a special token, or after a newline
between two plain bytes); the chunks are dealt to workers, largest first to the least loaded, and each
worker reads its chunks one at a time and returns one Counter. Small files are counted in this process.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Sequence
from typing import BinaryIO

import regex

from ..tokenization.pretokenize import GPT2_PATTERN, GPT4_PATTERN, split_on_special_tokens
from .array_counts import count_gpt2_pretokens
from ..tokenization.process_pool import make_executor, map_in_order, resolve_workers

# Files smaller than this are counted in the calling process: on a few MB, starting a pool of
# workers costs about what it saves (measured on TinyStories, 2.4 MB).
PARALLEL_MIN_BYTES = 4 << 20
# Target chunk size: bounds a worker's memory (chunk text plus its pre-token list). Each worker
# reads its chunks one after another and returns one Counter.
CHUNK_BYTES = 1 << 20
# Block size used when searching forward for a chunk boundary.
SEARCH_BLOCK_BYTES = 1 << 12



def count_pretokens(
    path: str,
    special_tokens: Sequence[str],
    pattern: str,
    *,
    num_workers: int | None = None,
) -> Counter[str]:
    """Count the pre-tokens of a file (pre-token -> count), with special tokens removed."""
    num_workers = resolve_workers(num_workers)
    size = os.path.getsize(path)
    if size < PARALLEL_MIN_BYTES:
        num_workers = 1
    num_chunks = max(num_workers, -(-size // CHUNK_BYTES))
    bounds = find_chunk_boundaries(path, num_chunks, special_tokens, pattern)
    ranges = list(zip(bounds, bounds[1:]))
    groups = _balance(ranges, num_workers)
    tasks = [(path, group, list(special_tokens), pattern) for group in groups]
    if len(tasks) == 1:
        return _count_ranges(tasks[0])
    totals: Counter[str] = Counter()
    with make_executor(len(tasks)) as executor:
        job = f"counting the pre-tokens of {path}"
        for counts in map_in_order(executor, _count_ranges, tasks, max_in_flight=len(tasks), job=job):
            totals.update(counts)
    return totals


def _balance(ranges: list[tuple[int, int]], num_groups: int) -> list[list[tuple[int, int]]]:
    """Deal byte ranges to at most `num_groups` groups, largest first to the lightest group."""
    groups: list[list[tuple[int, int]]] = [[] for _ in range(min(num_groups, len(ranges)))]
    loads = [0] * len(groups)
    for start, end in sorted(ranges, key=lambda r: r[0] - r[1]):
        lightest = loads.index(min(loads))
        groups[lightest].append((start, end))
        loads[lightest] += end - start
    return groups


def find_chunk_boundaries(
    path: str, num_chunks: int, special_tokens: Sequence[str], pattern: str
) -> list[int]:
    """Byte offsets [0, ..., size] cutting the file where pre-tokenization cannot be changed.

    With special tokens, a boundary is the start of the first special token at or after an even
    split point. Without them, and only for the built-in patterns, it is just after a newline
    that sits between two non-space ASCII bytes (both patterns end and start a pre-token there).
    Otherwise the file is one chunk. The search reads small blocks, never the whole file.
    """
    size = os.path.getsize(path)
    if special_tokens:
        needles = [token.encode("utf-8") for token in special_tokens]
        after = False
    elif pattern in (GPT2_PATTERN, GPT4_PATTERN):
        needles = [b"\n"]
        after = True
    else:
        return [0, size]
    bounds = [0]
    with open(path, "rb") as handle:
        for k in range(1, num_chunks):
            position = max(size * k // num_chunks, bounds[-1])
            cut = _search_forward(handle, position, size, needles, after)
            if not after and cut < size:
                cut = _start_of_covering_special(handle, cut, needles)
            if cut > bounds[-1] and cut < size:
                bounds.append(cut)
    bounds.append(size)
    return bounds


def _search_forward(
    handle: BinaryIO, position: int, size: int, needles: list[bytes], after: bool
) -> int:
    """Offset of the first cut at or after `position` (or `size` when there is none)."""
    overlap = max(len(n) for n in needles) + 1
    while position < size:
        handle.seek(position)
        block = handle.read(SEARCH_BLOCK_BYTES + overlap)
        hits = [h for h in (_find_cut(block, n, after) for n in needles) if h >= 0]
        if hits:
            return position + min(hits)
        if len(block) <= overlap:
            break
        position += SEARCH_BLOCK_BYTES
    return size


def _start_of_covering_special(handle: BinaryIO, cut: int, needles: list[bytes]) -> int:
    """Move a cut back to the start of a longer special token that covers it ("A<|x|>" vs "<|x|>")."""
    span = max(len(n) for n in needles) - 1
    start = max(cut - span, 0)
    handle.seek(start)
    window = handle.read(cut - start + span + 1)
    best = cut
    for needle in needles:
        index = window.find(needle)
        while 0 <= index and start + index < best:
            if start + index + len(needle) > cut:
                best = start + index
                break
            index = window.find(needle, index + 1)
    return best


def _find_cut(block: bytes, needle: bytes, after: bool) -> int:
    """Index in `block` of a cut: at `needle`, or (after=True) just past a safe newline."""
    if not after:
        return block.find(needle)
    index = block.find(needle, 1)
    while 0 < index < len(block) - 1:
        if _is_plain(block[index - 1]) and _is_plain(block[index + 1]):
            return index + 1
        index = block.find(needle, index + 1)
    return -1


def _is_plain(byte: int) -> bool:
    return 0x21 <= byte <= 0x7E


def _count_ranges(task: tuple[str, list[tuple[int, int]], list[str], str]) -> Counter[str]:
    """Worker: read byte ranges one at a time, drop special tokens, count regex pre-tokens
    (GPT-2's pattern: `count_gpt2_pretokens`, equal to the regex and `Counter`)."""
    path, ranges, special_tokens, pattern = task
    finder = regex.compile(pattern).findall
    counts: Counter[str] = Counter()
    with open(path, "rb") as handle:
        for start, end in ranges:
            handle.seek(start)
            data = handle.read(end - start)
            try:  # ranges start and end at plain ASCII bytes, so a strict decode never cuts a character
                text = data.decode("utf-8-sig" if start == 0 else "utf-8")  # a leading byte-order mark is no text
            except UnicodeDecodeError as exc:
                raise ValueError(f"{path!r} is not UTF-8 (bad byte near offset {start + exc.start}); "
                                 "re-encode it as UTF-8") from None
            parts = split_on_special_tokens(text, special_tokens)
            if pattern == GPT2_PATTERN:  # the same counts, as array operations
                counts.update(count_gpt2_pretokens(parts))
                continue
            for part in parts:
                if part:
                    counts.update(finder(part))
    return counts
