"""The pre-token table: hashes that do not depend on position, hits verified so a collision cannot
change an id, and BPETokenizer's table path equal to the merge loop and to tiktoken."""

from __future__ import annotations

import numpy as np
import pytest
import regex
import tiktoken
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import shared_file
from tinylm_hf.tokenization import bpe as bpe_module
from tinylm_hf.tokenization.bpe import BPETokenizer
from tinylm_hf.tokenization.int_table import IntTable
from tinylm_hf.tokenization.pretoken_table import PretokenTable, hash_spans
from tinylm_hf.tokenization.pretokenize import GPT2_PATTERN
from tinylm_hf.tokenization.pretokenize_arrays import code_points

EOT = "<|endoftext|>"
TRICKY = " \t\n\r\x0b\x85\xa0\u3000'sdmtlvre aZ09.,!?-é漢字٣²😀\u0301"
tricky_text = st.text(alphabet=st.sampled_from(TRICKY), max_size=60) | st.text(max_size=40)


def spell(words: list[str]) -> dict[str, list[int]]:
    """Toy ids: each word's code points."""
    return {w: [ord(c) for c in w] for w in words}


@pytest.fixture(scope="module")
def gpt2() -> BPETokenizer:
    return BPETokenizer.from_files(shared_file("gpt2_vocab.json"), shared_file("gpt2_merges.txt"), [EOT])


@pytest.fixture(scope="module")
def reference(gpt2: BPETokenizer) -> tiktoken.Encoding:
    ranks = {token: i for i, token in gpt2.vocab.items() if i != gpt2.special_ids[EOT]}
    return tiktoken.Encoding("gpt2-local", pat_str=GPT2_PATTERN, mergeable_ranks=ranks, special_tokens={EOT: 50256})


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


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(parts=st.lists(tricky_text | st.just(EOT), max_size=6))
def test_table_path_equals_tiktoken_across_special_tokens(gpt2, reference, parts: list[str]) -> None:
    text = "".join(parts)
    assert gpt2.encode(text) == reference.encode(text, allowed_special="all")


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=tricky_text)
def test_table_path_equals_the_merge_loop_over_regex_pretokens(gpt2, text: str) -> None:
    pieces = regex.findall(GPT2_PATTERN, text)
    assert gpt2.encode_ordinary(text) == [i for piece in pieces for i in gpt2._encode_pretoken(piece)]


def test_small_blocks_and_a_small_table_give_the_same_ids(gpt2, reference, monkeypatch) -> None:
    monkeypatch.setattr(bpe_module, "BLOCK_CHARS", 500)
    monkeypatch.setattr(bpe_module, "CACHE_LIMIT", 64)
    small = BPETokenizer(gpt2.vocab, gpt2.merges, gpt2.special_tokens)
    text = shared_file("tinystories_sample.txt").read_text(encoding="utf-8") + "  x\n\n" + "ACGT" * 300
    for _ in range(2):  # the second pass meets a table that was emptied back to its seed
        assert small.encode(text) == reference.encode(text, allowed_special="all")
