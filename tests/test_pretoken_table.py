"""The pre-token table (BPE training's array counting): hashes that do not depend on position, and hits
verified so a collision cannot change an id."""

from __future__ import annotations

import numpy as np
import pytest
from tinylm_hf.tokenization.int_table import IntTable
from tinylm_hf.tokenization.pretoken_table import PretokenTable, hash_spans
from tinylm_hf.tokenization.pretokenize_arrays import code_points



def spell(words: list[str]) -> dict[str, list[int]]:
    """Toy ids: each word's code points."""
    return {w: [ord(c) for c in w] for w in words}


def test_a_span_hashes_the_same_wherever_it_stands() -> None:
    points = code_points("abc xabc")
    hashes = hash_spans(points, np.array([0, 5, 0]), np.array([3, 8, 2]))
    assert hashes[0] == hashes[1] != hashes[2]


def test_int_table_finds_what_it_stored_and_grows() -> None:
    table = IntTable(np.array([5, 9]), np.array([50, 90]), missing=-7)
    table.insert(np.arange(100, 400), np.arange(300))
    assert table.get(np.array([5, 9, 250, 4, -1])).tolist() == [50, 90, 150, -7, -7]


def test_a_hash_collision_is_a_miss_not_a_wrong_id() -> None:
    # Store "xyz" under the hash of "abc": a forged collision.
    abc, xyz = code_points("abc"), code_points("xyz")
    forged = hash_spans(abc, np.array([0]), np.array([3]))
    table = PretokenTable([], {})
    table._add(xyz, np.array([3]), forged, np.array([1, 2, 3]), np.array([3]))
    assert table.lookup(abc, np.array([0]), np.array([3]), forged).tolist() == [-1]
    ids, _ = table.encode("abc", np.array([0, 3]), spell)
    assert ids.tolist() == [97, 98, 99]


def test_the_table_learns_missed_pretokens_once() -> None:
    asked: list[list[str]] = []

    def encode_missing(words: list[str]) -> dict[str, list[int]]:
        asked.append(words)
        return spell(words)

    table = PretokenTable(["ab"], {"ab": [1]})
    ids, before = table.encode("ab c ab c", np.array([0, 4, 9]), encode_missing)
    assert ids.tolist() == [1, 32, 99, 32, 97, 98, 32, 99]
    assert before.tolist() == [0, 3, 8]
    table.encode(" c", np.array([0, 2]), encode_missing)
    assert asked == [[" c", " ab"]]
