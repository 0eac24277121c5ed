"""Unigram training's lattices: the numba kernels equal the pure-Python references, and the references equal a
naive oracle that lists every segmentation."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import PACKAGE_DATA, shared_file
from kernel_paths import kernel_path, modules_loaded_by  # noqa: F401
from tinylm_hf.tokenization.jit import numba_installed
from tinylm_hf.tokenization.metaspace.train import count_characters, count_metaspace_words
from tinylm_hf.tokenization.unigram import lattice as unigram_lattice
from tinylm_hf.tokenization.unigram.lattice import Lattice, build_lattice, expected_counts, viterbi_pieces
from tinylm_hf.tokenization.unigram.seeds import seed_pieces
from tinylm_hf.tokenization.unigram.train import _clean_words, train_unigram

needs_numba = pytest.mark.skipif(not numba_installed(), reason="numba is not installed")


def segmentations(string: str, ids: dict[str, int]) -> list[list[int]]:
    """Every way to write `string` as pieces (ids), by brute force."""
    if not string:
        return [[]]
    return [[ids[string[:n]], *rest] for n in range(1, len(string) + 1) if string[:n] in ids
            for rest in segmentations(string[n:], ids)]


def naive_expected(strings: list[str], freqs: list[float], pieces: list[str], scores: list[float]) -> list[float]:
    """Each piece's expected count: the probability-weighted mean of its uses over all segmentations."""
    ids = {p: i for i, p in enumerate(pieces)}
    expected = [0.0] * len(pieces)
    for string, freq in zip(strings, freqs):
        paths = segmentations(string, ids)
        probs = [math.exp(sum(scores[i] for i in path)) for path in paths]
        for path, prob in zip(paths, probs):
            for i in path:
                expected[i] += freq * prob / sum(probs)
    return expected


def naive_best(string: str, pieces: list[str], scores: list[float]) -> list[int]:
    """The best segmentation; ties go to the one whose pieces, read from the end, start earliest."""
    paths = segmentations(string, {p: i for i, p in enumerate(pieces)})
    starts = [[len(string) - sum(len(pieces[i]) for i in path[k:]) for k in range(len(path))][::-1] for path in paths]
    best = max(range(len(paths)), key=lambda n: (sum(scores[i] for i in paths[n]), [-s for s in starts[n]]))
    return paths[best]


def run_both(monkeypatch, fn):
    """fn() on the kernels (for inputs of every size), then on the references."""
    monkeypatch.setattr(unigram_lattice, "KERNEL_MIN_CHARS", 0)
    monkeypatch.setenv("TINYLM_KERNELS", "1")
    fast = fn()
    monkeypatch.setenv("TINYLM_KERNELS", "0")
    return fast, fn()


def assert_same_lattice(a: Lattice, b: Lattice) -> None:
    for name in ("lengths", "offsets", "start", "end", "piece"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)


PIECES = ["▁", "a", "b", "ab", "▁a", "c"]
SCORES = np.log(np.array([0.2, 0.1, 0.15, 0.3, 0.2, 0.05]))


def test_nodes_are_every_piece_in_each_string_by_start_then_end(kernel_path) -> None:
    lattice = build_lattice(["▁ab", "ab"], PIECES, whole=True)
    assert lattice.offsets.tolist() == [0, 5, 8]
    assert list(zip(lattice.start.tolist(), lattice.end.tolist(), lattice.piece.tolist())) == [
        (0, 1, 0), (0, 2, 4), (1, 2, 1), (1, 3, 3), (2, 3, 2), (0, 1, 1), (0, 2, 3), (1, 2, 2)]


def test_a_pieces_own_lattice_leaves_out_the_piece(kernel_path) -> None:
    lattice = build_lattice(["ab", "▁a"], PIECES, whole=False)
    assert lattice.piece.tolist() == [1, 2, 0, 1]


def test_expected_counts_equal_the_mean_over_all_segmentations(kernel_path) -> None:
    strings, freqs = ["▁ab", "ab", "▁abab"], [3.0, 1.0, 2.0]
    lattice = build_lattice(strings, PIECES, whole=True)
    got = expected_counts(lattice, SCORES, np.array(freqs))
    np.testing.assert_allclose(got, naive_expected(strings, freqs, PIECES, SCORES.tolist()), rtol=1e-12)


def test_viterbi_ties_keep_the_last_piece_that_starts_earliest(kernel_path) -> None:
    # ▁ + ab and ▁a + b both score -3.5: ab starts first (as the encoder and sentencepiece decide).
    scores = np.array([-2.0, -3.0, -2.5, -1.5, -1.0, -9.0])
    owners, used = viterbi_pieces(build_lattice(["▁ab"], PIECES, whole=True), scores)
    assert owners.tolist() == [0, 0] and sorted(used.tolist()) == [0, 3]


def test_a_string_without_a_path_gives_no_pieces(kernel_path) -> None:
    owners, used = viterbi_pieces(build_lattice(["ab", "abc"], ["ab", "b", "bc"], whole=False), np.zeros(3))
    assert owners.tolist() == [] and used.tolist() == []


def test_a_long_string_of_rare_pieces_is_counted_in_log_space(kernel_path) -> None:
    # Its one path has probability exp(-2000), below the smallest float: the log-space pass counts it.
    lattice = build_lattice(["a" * 1000, "ab"], ["a", "b"], whole=True)
    got = expected_counts(lattice, np.array([-2.0, -1.0]), np.array([2.0, 5.0]))
    np.testing.assert_allclose(got, [2005.0, 5.0])


def test_the_log_space_pass_equals_the_probability_pass(monkeypatch) -> None:
    monkeypatch.setenv("TINYLM_KERNELS", "0")
    strings, freqs = ["▁ab", "ab", "▁abab", "▁ababcab"], np.array([3.0, 1.0, 2.0, 4.0])
    lattice = build_lattice(strings, PIECES, whole=True)
    in_probabilities = expected_counts(lattice, SCORES, freqs)
    monkeypatch.setattr(unigram_lattice, "TINY", 2.0)  # every string's total is below 2: all in logs
    np.testing.assert_allclose(expected_counts(lattice, SCORES, freqs), in_probabilities, rtol=1e-12)


@needs_numba
def test_kernels_equal_references_on_underflowing_strings(monkeypatch) -> None:
    strings = ["a" * 1500, "ab" * 400 + "a" * 300, "ab"]
    scores, freqs = np.array([-3.0, -4.0, -5.0]), np.array([1.0, 2.0, 3.0])
    fast, slow = run_both(monkeypatch, lambda: expected_counts(build_lattice(strings, ["a", "b", "ab"], whole=True),
                                                               scores, freqs))
    np.testing.assert_allclose(fast, slow, rtol=1e-12)
    assert fast[0] + fast[2] == pytest.approx(1500 + 2 * 700 + 3)  # every "a" is in one piece


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(strings=st.lists(st.text(min_size=1, max_size=7), min_size=1, max_size=5),
       cuts=st.lists(st.tuples(st.integers(0, 6), st.integers(1, 4)), max_size=12),
       seed=st.integers(0, 2**16))
def test_kernels_equal_references_and_the_oracle_on_any_text(monkeypatch, strings, cuts, seed) -> None:
    # Pieces: every character plus some substrings of the strings, over all of Unicode.
    pieces = sorted({c for s in strings for c in s} | {s[i:i + n] for s in strings for i, n in cuts if s[i:i + n]})
    scores = np.log(np.random.default_rng(seed).uniform(0.01, 1.0, len(pieces)))
    freqs = np.arange(1.0, len(strings) + 1)
    if not numba_installed():
        pytest.skip("numba is not installed")

    def run():
        lattice = build_lattice(strings, pieces, whole=True)
        return lattice, expected_counts(lattice, scores, freqs), viterbi_pieces(lattice, scores)

    (fast, fast_counts, fast_best), (slow, slow_counts, slow_best) = run_both(monkeypatch, run)
    assert_same_lattice(fast, slow)
    np.testing.assert_allclose(fast_counts, slow_counts, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(slow_counts, naive_expected(strings, freqs.tolist(), pieces, scores.tolist()),
                               rtol=1e-9, atol=1e-12)
    assert [a.tolist() for a in fast_best] == [a.tolist() for a in slow_best]
    for s, string in enumerate(strings):
        assert sorted(slow_best[1][slow_best[0] == s].tolist()) == sorted(naive_best(string, pieces, scores.tolist()))


def corpus_words(source: str, chars: int | None) -> dict[str, int]:
    path = PACKAGE_DATA / source if (PACKAGE_DATA / source).is_file() else shared_file(source)
    with open(path, encoding="utf-8") as f:
        return _clean_words(count_metaspace_words([f.read(chars)]))


@needs_numba
@pytest.mark.parametrize(("source", "chars"), [
    ("tinystories_valid_small.txt", 300_000),
    ("pd_novels_heldout.txt", 300_000),
    ("multilingual_samples.txt", None),
])
def test_kernels_equal_references_on_corpora(monkeypatch, source: str, chars: int | None) -> None:
    words = corpus_words(source, chars)
    pieces, scores, _ = seed_pieces(words, count_characters(words), 16, 1_000_000)
    freqs = np.array(list(words.values()), dtype=np.float64)

    def run():
        lattice = build_lattice(list(words), pieces, whole=True)
        own = build_lattice(pieces, pieces, whole=False)
        return lattice, own, expected_counts(lattice, scores, freqs), viterbi_pieces(own, scores)

    fast, slow = run_both(monkeypatch, run)
    assert_same_lattice(fast[0], slow[0])
    assert_same_lattice(fast[1], slow[1])
    np.testing.assert_allclose(fast[2], slow[2], rtol=1e-12)
    assert [a.tolist() for a in fast[3]] == [a.tolist() for a in slow[3]]


@needs_numba
@pytest.mark.parametrize(("source", "chars", "vocab_size"), [
    ("tinystories_valid_small.txt", 400_000, 1000),
    ("multilingual_samples.txt", None, 2500),
])
def test_training_on_kernels_equals_training_on_references(monkeypatch, source, chars, vocab_size) -> None:
    words = corpus_words(source, chars)
    fast, slow = run_both(monkeypatch, lambda: train_unigram(words, vocab_size, progress=False))
    assert fast == slow  # the same arithmetic in the same order: equal pieces and scores, bit for bit


def test_a_small_training_run_does_not_load_numba() -> None:
    # Below KERNEL_MIN_CHARS the reference finishes before numba would have loaded.
    code = ("from tinylm_hf.tokenization.unigram.train import train_unigram\n"
            "words = {'\u2581the': 5, '\u2581then': 3, '\u2581than': 2, '\u2581hen': 2}\n"
            "train_unigram(words, 12, progress=False)")
    assert modules_loaded_by(code, ("numba",)) == []


_LATTICE_PEAK = """
import itertools, json, sys
import numpy as np
from tinylm_hf.tokenization.unigram import lattice_kernels  # noqa: F401 (numba loaded: the kernels run)
from tinylm_hf.tokenization.unigram.lattice import build_lattice

text = np.random.default_rng(0).choice(np.frombuffer(b"ab", np.uint8), 2_000_000).tobytes().decode()
strings = [text[i : i + 40] for i in range(0, len(text), 40)]
pieces = ["".join(p) for n in range(1, 5) for p in itertools.product("ab", repeat=n)]
build_lattice(strings[:100], pieces, whole=True).keep(np.arange(len(pieces)) % 2 == 0)  # compiled
if sys.argv[1] == "keep":
    lattice = build_lattice(strings, pieces, whole=True)

def rss(key):
    return next(int(line.split()[1]) * 1024 for line in open("/proc/self/status") if line.startswith(key))

with open("/proc/self/clear_refs", "w") as f:
    f.write("5")  # the peak (VmHWM) starts again from here
before = rss("VmRSS")
if sys.argv[1] == "keep":
    made = lattice
    made.keep(np.arange(len(pieces)) % 2 == 0)
else:
    made = build_lattice(strings, pieces, whole=True)
print(json.dumps({"grown": rss("VmHWM") - before, "nodes": made.start.nbytes + made.end.nbytes + made.piece.nbytes}))
"""


def _lattice_peak(step: str) -> dict[str, int]:
    out = subprocess.run([sys.executable, "-c", _LATTICE_PEAK, step], capture_output=True, text=True, check=True,
                         env={**os.environ, "TINYLM_KERNELS": "1"})
    return json.loads(out.stdout)


needs_clear_refs = pytest.mark.skipif(not os.access("/proc/self/clear_refs", os.W_OK),
                                      reason="needs Linux's /proc/self/clear_refs")


@needs_numba
@needs_clear_refs
def test_building_a_lattice_holds_its_nodes_once() -> None:
    # Issue 38: the kernel filled an oversized buffer and returned a trimmed copy, holding the nodes twice at the
    # peak; counting first, it writes arrays of exactly the nodes' size. The rest is the strings' code points
    # (about 10 bytes a character, 2M characters here).
    measured = _lattice_peak("build")
    assert measured["grown"] < measured["nodes"] + 12 * 2_000_000


@needs_numba
@needs_clear_refs
def test_keep_drops_nodes_in_place() -> None:
    # Issue 38: `keep` made a second lattice beside the first (with an oversized buffer and a trimmed copy): training's
    # peak on many words. In place, it allocates nothing per node.
    measured = _lattice_peak("keep")
    assert measured["grown"] < 0.1 * measured["nodes"]


@pytest.mark.parametrize("path", ["kernels", "reference"])
def test_keep_leaves_the_lattice_of_the_live_pieces(monkeypatch, path: str) -> None:
    if path == "kernels" and not numba_installed():
        pytest.skip("numba is not installed")
    monkeypatch.setenv("TINYLM_KERNELS", "1" if path == "kernels" else "0")
    monkeypatch.setattr(unigram_lattice, "KERNEL_MIN_CHARS", 0)
    words = list(corpus_words("tinystories_valid_small.txt", 20_000))
    pieces, _, _ = seed_pieces(dict.fromkeys(words, 2), count_characters(dict.fromkeys(words, 2)), 16, 1_000_000)
    alive = np.arange(len(pieces)) % 3 != 1
    lattice = build_lattice(words, pieces, whole=True)
    lattice.keep(alive)
    fresh = build_lattice(words, [p if live else "\0" for p, live in zip(pieces, alive)], whole=True)
    assert_same_lattice(lattice, fresh)


@needs_numba
@pytest.mark.parametrize("longest", [0xFFFF, 0x10000])
def test_node_positions_are_two_bytes_up_to_65535_characters(monkeypatch, longest: int) -> None:
    monkeypatch.setenv("TINYLM_KERNELS", "1")
    monkeypatch.setattr(unigram_lattice, "KERNEL_MIN_CHARS", 0)
    strings = ["ab" * 10, "a" * longest]
    lattice = build_lattice(strings, ["a", "b", "ab"], whole=True)
    assert lattice.start.dtype == lattice.end.dtype == (np.uint16 if longest <= 0xFFFF else np.int32)
    assert int(lattice.end[lattice.offsets[1]:].max()) == longest  # the last node of the long string ends there
