"""Counting GPT-2 pre-tokens as array operations, for BPE training.

`Counter(regex.findall(GPT2_PATTERN, text))` is the specification. Here the array pre-tokenizer
(`pretokenize_arrays`) finds every pre-token, each is hashed (`pretoken_table.hash_spans`), and
the distinct hashes (`np.sort`, then an `IntTable` from hash to group) count them, with one
representative string per hash. Every pre-token
is then compared with its representative, code point by code point, so a hash collision can never
merge two different pre-tokens' counts (the rare colliding ones are counted one by one).
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from ..tokenization.int_table import IntTable
from ..tokenization.pretoken_table import hash_spans, spans_match
from ..tokenization.pretokenize import split_into_blocks
from ..tokenization.pretokenize_arrays import pretoken_bounds

# Texts are counted a block of about this many characters at a time: the arrays of a block take
# some 30 bytes a character, so the block, not the chunk, sets the memory (65k: as fast as 256k,
# 13 MB less peak when counting TinyStories).
COUNT_BLOCK_CHARS = 1 << 16


def count_gpt2_pretokens(texts: list[str]) -> Counter[str]:
    """pre-token -> count over independent texts, a block of `COUNT_BLOCK_CHARS` at a time (see `count_gpt2_block`)."""
    counts: Counter[str] = Counter()
    for block in split_into_blocks(texts, COUNT_BLOCK_CHARS):
        counts.update(count_gpt2_block(block))
    return counts


def count_gpt2_block(texts: list[str]) -> Counter[str]:
    """pre-token -> count over independent texts, equal to counting `regex.findall(GPT2_PATTERN, t)` for each.

    >>> sorted(count_gpt2_pretokens(["the cat", " the cat"]).items())
    [(' cat', 2), (' the', 1), ('the', 1)]
    """
    joined = "".join(texts)
    lengths_of_texts = np.fromiter(map(len, texts), dtype=np.int64, count=len(texts))
    cuts = np.concatenate([[0], np.cumsum(lengths_of_texts)])
    points, starts, ends = pretoken_bounds(joined, cuts)
    if not len(starts):
        return Counter()
    hashes = hash_spans(points, starts, ends).view(np.int64)
    group, first, counts = _group(hashes)
    lengths = ends - starts
    representative = first[group]  # a pre-token with the same hash
    same = (lengths == lengths[representative]) & spans_match(points, starts, lengths, points, starts[representative])
    words = map(joined.__getitem__, map(slice, starts[first].tolist(), ends[first].tolist()))
    result = Counter(dict(zip(words, counts.tolist())))
    for i in np.flatnonzero(~same).tolist():  # a collision: move the count to the pre-token's own string
        result[joined[starts[i] : ends[i]]] += 1
        result[joined[starts[representative[i]] : ends[representative[i]]]] -= 1
    return result


def _group(hashes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(each hash's group, one position per group, each group's size): `np.unique` without its argsort."""
    ordered = np.sort(hashes)
    new = np.ones(len(ordered), dtype=bool)
    new[1:] = ordered[1:] != ordered[:-1]
    distinct = ordered[new]
    counts = np.diff(np.append(np.flatnonzero(new), len(ordered)))
    group = IntTable(distinct, np.arange(len(distinct)), missing=-1).get(hashes)
    first = np.empty(len(distinct), dtype=np.int64)
    first[group] = np.arange(len(hashes))  # any position of the group will do
    return group, first, counts
