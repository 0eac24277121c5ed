"""FlatWords.merge: the same words and pair counts as pair_merges.merge_words, in both of its paths."""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tinylm_hf.tokenizer_training import flat_merges
from tinylm_hf.tokenizer_training.flat_merges import FlatWords
from tinylm_hf.tokenizer_training.pair_merges import PAIR_MASK, PAIR_SHIFT, merge_words

PATHS = [pytest.param(0, id="numpy"), pytest.param(10**9, id="python")]


def _flat(words: list[list[int]], freqs: list[int]) -> FlatWords:
    symbols = np.array([s for w in words for s in w], dtype=np.int64)
    return FlatWords(symbols, np.array([len(w) for w in words]), np.array(freqs))


def _words_of(flat: FlatWords) -> list[list[int]]:
    """Walk each word's linked symbols from its first position."""
    words = []
    for start in np.flatnonzero((flat.prev == -1) & (flat.symbol >= 0)).tolist():
        word, at = [], start
        while at >= 0:
            word.append(int(flat.symbol[at]))
            at = int(flat.next[at])
        words.append(word)
    return words


def _reference(words, freqs):
    counts, where = defaultdict(int), defaultdict(list)
    for index, word in enumerate(words):
        for a, b in zip(word, word[1:]):
            counts[(a << PAIR_SHIFT) | b] += freqs[index]
            where[(a << PAIR_SHIFT) | b].append(index)
    return counts, where


def _check_merges(words: list[list[int]], freqs: list[int], steps: int) -> None:
    flat = _flat(words, freqs)
    words = [list(w) for w in words]
    counts, where = _reference(words, freqs)
    next_id = 1 + max(s for w in words for s in w)
    for _ in range(steps):
        live = {p: c for p, c in counts.items() if c > 0}
        if not live:
            break
        pair = max(live, key=lambda p: (live[p], p))  # most frequent, ties to the greatest pair
        made, replaced = merge_words(words, freqs, where.pop(pair), pair >> PAIR_SHIFT, pair & PAIR_MASK,
                                     next_id, counts, where)
        del counts[pair]
        flat_made, flat_replaced = flat.merge(pair, next_id)
        assert flat_replaced == replaced
        assert {p for p in flat_made if flat.pair_counts.get(p, 0) > 0} == {p for p in made if counts[p] > 0}
        assert {p: c for p, c in flat.pair_counts.items() if c} == {p: c for p, c in counts.items() if c}
        next_id += 1
    assert _words_of(flat) == [w for w in words]


@pytest.mark.parametrize("numpy_min_positions", PATHS)
def test_hand_checked_runs_and_alternations(monkeypatch, numpy_min_positions):
    # a a a a a (runs of a pair with itself: left to right), a b a b (adjacent occurrences).
    monkeypatch.setattr(flat_merges, "NUMPY_MIN_POSITIONS", numpy_min_positions)
    _check_merges([[1, 1, 1, 1, 1], [1, 2, 1, 2], [2, 1, 1, 1, 2], [3, 1]], [3, 2, 5, 1], 8)


@pytest.mark.parametrize("numpy_min_positions", PATHS)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    words=st.lists(st.lists(st.integers(0, 3), min_size=1, max_size=9), min_size=1, max_size=25),
    data=st.data(),
)
def test_random_words_match_merge_words(monkeypatch, numpy_min_positions, words, data):
    # The patched value is the same for every example, so sharing the fixture across them is safe.
    monkeypatch.setattr(flat_merges, "NUMPY_MIN_POSITIONS", numpy_min_positions)
    freqs = data.draw(st.lists(st.integers(1, 5), min_size=len(words), max_size=len(words)))
    _check_merges(words, freqs, 12)
