"""bpe_merge: the reference merge loops (the textbook rescan and the heap) apply one merge rule, with equal results."""

from __future__ import annotations

import pytest
import regex
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import PACKAGE_DATA
from tinylm_hf.tokenization.bpe.core import BPETokenizer
from tinylm_hf.tokenization.bpe.merge import merge_by_heap, merge_short
from tinylm_hf.tokenization.bpe.train import train_bpe
from tinylm_hf.tokenization.pretokenize import pretokenize_gpt2


@pytest.fixture(scope="module")
def small() -> BPETokenizer:
    """A 600-token BPE trained here on the bundled TinyStories text (no shared data needed)."""
    text = (PACKAGE_DATA / "tinystories_train_small.txt").read_text(encoding="utf-8")[:300_000]
    vocab, merges = train_bpe([text], 600, ["<|endoftext|>"], progress=False)
    return BPETokenizer(vocab, merges, ["<|endoftext|>"])


# ------------------------------------------------------------------------------ hand-checkable
def test_merge_short_takes_the_lowest_rank_then_the_leftmost() -> None:
    ranks = {(97, 98): 1, (98, 99): 0, (97, 97): 2}  # "bc" before "ab"; "aa" last
    assert merge_short([97, 98, 99], ranks.get, [256, 257, 258]) == [97, 256]
    assert merge_short([97, 97, 97], ranks.get, [256, 257, 258]) == [258, 97]  # leftmost "aa" first


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.binary(min_size=1, max_size=200))
def test_heap_equals_the_short_loop(small: BPETokenizer, word: bytes) -> None:
    ids = [small._byte_ids[b] for b in word]
    assert merge_by_heap(list(ids), small.ranks.get, small._merged_by_rank) == merge_short(
        list(ids), small.ranks.get, small._merged_by_rank
    )


def test_a_pattern_matching_empty_strings_still_encodes(small: BPETokenizer) -> None:
    tok = BPETokenizer(small.vocab, small.merges, pattern=r"\w*|\s")  # findall yields "" after each word
    text = " ".join(f"word{i}" for i in range(500))
    assert tok.encode(text) == [i for piece in regex.findall(r"\w*|\s", text) for i in small._encode_pretoken(piece)]


def test_ids_past_int32_encode_on_the_reference_path() -> None:
    vocab = {i: bytes([i]) for i in range(256)} | {1 << 40: b"ab"}
    tok = BPETokenizer(vocab, [(b"a", b"b")])
    assert tok._kernel_pattern is None  # the kernels' packed pair table holds ids below 2**21
    text = " ".join(["ab", "cab"] * 100)
    assert tok.encode(text)[:6] == [1 << 40, 32, 99, 1 << 40, 32, 1 << 40]
    assert tok.encode(text) == [i for piece in pretokenize_gpt2(text) for i in tok._encode_pretoken(piece)]
