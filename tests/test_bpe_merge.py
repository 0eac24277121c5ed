"""bpe_merge: the per-word loop, the heap and the numpy batch apply one merge rule, with equal results."""

from __future__ import annotations

import random

import numpy as np
import pytest
import regex
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import PACKAGE_DATA, shared_file
from tinylm_hf.tokenization import bpe as bpe_module
from tinylm_hf.tokenization import bpe_merge
from tinylm_hf.tokenization.bpe import BPETokenizer
from tinylm_hf.tokenization.bpe_merge import NO_RANK, BatchMerger, merge_by_heap, merge_short
from tinylm_hf.tokenizer_training.bpe_train import train_bpe_from_iterator
from tinylm_hf.tokenization.pretokenize import pretokenize_gpt2


def merger_of(tok: BPETokenizer) -> BatchMerger:
    return BatchMerger(tok.ranks, tok._merged_by_rank, tok._byte_ids)


def one_by_one(tok: BPETokenizer, words: list[bytes]) -> list[list[int]]:
    return [merge_short([tok._byte_ids[b] for b in word], tok.ranks.get, tok._merged_by_rank) for word in words]


@pytest.fixture(scope="module")
def small() -> BPETokenizer:
    """A 600-token BPE trained here on the bundled TinyStories text (no shared data needed)."""
    text = (PACKAGE_DATA / "tinystories_train_small.txt").read_text(encoding="utf-8")[:300_000]
    vocab, merges = train_bpe_from_iterator([text], 600, ["<|endoftext|>"], progress=False)
    return BPETokenizer(vocab, merges, ["<|endoftext|>"])


@pytest.fixture(scope="module")
def gpt2() -> BPETokenizer:
    return BPETokenizer.from_files(shared_file("gpt2_vocab.json"), shared_file("gpt2_merges.txt"))


# ------------------------------------------------------------------------------ hand-checkable
def test_merge_short_takes_the_lowest_rank_then_the_leftmost() -> None:
    ranks = {(97, 98): 1, (98, 99): 0, (97, 97): 2}  # "bc" before "ab"; "aa" last
    assert merge_short([97, 98, 99], ranks.get, [256, 257, 258]) == [97, 256]
    assert merge_short([97, 97, 97], ranks.get, [256, 257, 258]) == [258, 97]  # leftmost "aa" first


def test_batch_merges_a_run_of_one_byte_left_to_right() -> None:
    vocab = {i: bytes([i]) for i in range(256)} | {256: b"aa", 257: b"aaaa"}
    tok = BPETokenizer(vocab, [(b"a", b"a"), (b"aa", b"aa")])
    words = [b"a" * n for n in range(1, 12)]
    assert merger_of(tok).encode_words(words) == one_by_one(tok, words)
    assert merger_of(tok).encode_words([b"aaaaa"]) == [[257, 97]]


def test_batch_without_merges_returns_the_byte_ids() -> None:
    tok = BPETokenizer({i: bytes([i]) for i in range(256)}, [])
    assert merger_of(tok).encode_words([b"abc", b"z"]) == [[97, 98, 99], [122]]


def test_rank_table_answers_every_learned_pair_and_misses_the_rest(small: BPETokenizer) -> None:
    merger = merger_of(small)
    pairs = np.array(list(small.ranks), dtype=np.int64)
    assert merger.rank_of(pairs[:, 0], pairs[:, 1]).tolist() == list(small.ranks.values())
    rng = np.random.default_rng(0)
    left, right = rng.integers(0, len(small.vocab), 5000), rng.integers(0, len(small.vocab), 5000)
    expected = [small.ranks.get((a, b), NO_RANK) for a, b in zip(left.tolist(), right.tolist())]
    assert merger.rank_of(left, right).tolist() == expected


# ------------------------------------------------------------------------------ real pre-tokens
def test_batch_equals_one_by_one_on_the_bundled_corpus(small: BPETokenizer) -> None:
    text = (PACKAGE_DATA / "tinystories_train_small.txt").read_text(encoding="utf-8")
    words = sorted({p.encode() for p in pretokenize_gpt2(text[-400_000:])})
    assert len(words) > 3 * bpe_merge.TAIL_WORDS
    assert merger_of(small).encode_words(words) == one_by_one(small, words)


@pytest.mark.parametrize("name", ["pd_novels_heldout.txt", "multilingual_samples.txt"])
def test_batch_equals_one_by_one_with_gpt2(gpt2: BPETokenizer, name: str) -> None:
    text = shared_file(name).read_text(encoding="utf-8")[:1_000_000]
    words = [p.encode() for p in set(pretokenize_gpt2(text))]
    random.Random(0).shuffle(words)
    assert merger_of(gpt2).encode_words(words) == one_by_one(gpt2, words)


def test_few_words_finish_in_the_python_loop(small: BPETokenizer, monkeypatch: pytest.MonkeyPatch) -> None:
    words = [b"once upon a time", b" there", b" was", b" a little girl"]
    assert merger_of(small).encode_words(words) == one_by_one(small, words)  # fewer than TAIL_WORDS
    monkeypatch.setattr(bpe_merge, "TAIL_WORDS", 0)  # every round in numpy, down to the last word
    assert merger_of(small).encode_words(words) == one_by_one(small, words)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.binary(min_size=1, max_size=40) | st.text(min_size=1, max_size=12).map(str.encode), min_size=1, max_size=300))
def test_batch_equals_one_by_one_on_any_bytes(small: BPETokenizer, words: list[bytes]) -> None:
    assert merger_of(small).encode_words(words) == one_by_one(small, words)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.binary(min_size=1, max_size=200))
def test_heap_equals_the_short_loop(small: BPETokenizer, word: bytes) -> None:
    ids = [small._byte_ids[b] for b in word]
    assert merge_by_heap(list(ids), small.ranks.get, small._merged_by_rank) == merge_short(
        list(ids), small.ranks.get, small._merged_by_rank
    )


# ------------------------------------------------------------------------------ through the tokenizer
def test_cold_encode_batches_new_pretokens(small: BPETokenizer, monkeypatch: pytest.MonkeyPatch) -> None:
    text = (PACKAGE_DATA / "tinystories_valid_small.txt").read_text(encoding="utf-8")
    cold = BPETokenizer(small.vocab, small.merges, small.special_tokens)
    calls = []
    monkeypatch.setattr(cold._batch_merger, "encode_words", lambda words: calls.append(len(words)) or
                        BatchMerger.encode_words(cold._batch_merger, words))
    ids = cold.encode(text)
    assert calls and max(calls) > 1000  # the new pre-tokens went in bulk, not one miss at a time
    monkeypatch.setattr(bpe_module, "BATCH_MIN_WORDS", 1 << 60)  # one by one
    assert ids == BPETokenizer(small.vocab, small.merges, small.special_tokens).encode(text)


def test_a_pattern_matching_empty_strings_still_encodes(small: BPETokenizer) -> None:
    tok = BPETokenizer(small.vocab, small.merges, pattern=r"\w*|\s")  # findall yields "" after each word
    text = " ".join(f"word{i}" for i in range(500))
    assert tok.encode(text) == [i for piece in regex.findall(r"\w*|\s", text) for i in small._encode_pretoken(piece)]


def test_ids_past_int32_merge_word_by_word() -> None:
    vocab = {i: bytes([i]) for i in range(256)} | {1 << 40: b"ab"}
    tok = BPETokenizer(vocab, [(b"a", b"b")])
    assert tok._batch_merger is None
    text = " ".join(["ab", "cab"] * 100)
    assert tok.encode(text)[:6] == [1 << 40, 32, 99, 1 << 40, 32, 1 << 40]
    assert tok.encode(text) == [i for piece in pretokenize_gpt2(text) for i in tok._encode_pretoken(piece)]
