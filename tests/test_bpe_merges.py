"""The BPE merge loop: the numba kernel equals the pure-Python reference, and both equal the naive oracle
(a full recount per merge) on long pre-tokens and self-overlapping runs."""

from __future__ import annotations

import random
from collections import Counter

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import PACKAGE_DATA, shared_file
from kernel_paths import kernel_path, modules_loaded_by  # noqa: F401
from naive_bpe import naive_counts, naive_train
from tinylm_hf.tokenization.jit import numba_installed
from tinylm_hf.tokenization.pretokenize import GPT2_PATTERN
from tinylm_hf.tokenization.bpe import merges as bpe_merges
from tinylm_hf.tokenization.bpe.merges import learn_merges, learn_merges_reference
from tinylm_hf.tokenization.bpe.train import train_bpe
from tinylm_hf.tokenization.metaspace.train import count_characters, count_metaspace_words
from tinylm_hf.tokenization.piece_rules import piece_shape
from tinylm_hf.tokenization.sentencepiece_bpe.train import _symbol_words

EOT = "<|endoftext|>"
needs_numba = pytest.mark.skipif(not numba_installed(), reason="numba is not installed")


def dna(length: int, seed: int = 0) -> str:
    """Random "ACGT" text: one pre-token of `length` bytes under GPT-2's pattern."""
    rng = random.Random(seed)
    return "".join(rng.choice("ACGT") for _ in range(length))


def words_of(text: str, specials: list[str]) -> tuple[list[bytes], list[int], list[bytes]]:
    counts = naive_counts(text, specials, GPT2_PATTERN)
    words = [w.encode("utf-8") for w in counts if len(w.encode("utf-8")) > 1]
    token_bytes = [bytes([i]) for i in range(256)] + [s.encode("utf-8") for s in specials]
    return words, [counts[w.decode("utf-8")] for w in words], token_bytes


def kernel_merges(words: list[bytes], freqs: list[int], token_bytes: list[bytes], num_merges: int) -> list:
    symbols = np.frombuffer(b"".join(words), dtype=np.uint8)
    lengths = np.array([len(w) for w in words], dtype=np.int64)
    return learn_merges(symbols, lengths, freqs, token_bytes, num_merges)


@needs_numba
@pytest.mark.parametrize(("source", "chars", "num_merges"), [
    ("tinystories_valid_small.txt", 800_000, 3000),
    ("pd_novels_heldout.txt", 1_000_000, 2000),
    ("multilingual_samples.txt", None, 1500),
    ("tiny_shakespeare.txt", None, 1000),
])
def test_kernel_equals_reference_on_corpora(monkeypatch, source: str, chars: int | None, num_merges: int) -> None:
    monkeypatch.setenv("TINYLM_KERNELS", "1")
    monkeypatch.setattr(bpe_merges, "KERNEL_MIN_SYMBOLS", 0)
    path = PACKAGE_DATA / source if (PACKAGE_DATA / source).is_file() else shared_file(source)
    with open(path, encoding="utf-8") as f:
        words, freqs, token_bytes = words_of(f.read(chars), [EOT])
    fast_bytes, slow_bytes = list(token_bytes), list(token_bytes)
    fast = kernel_merges(words, freqs, fast_bytes, num_merges)
    assert fast == learn_merges_reference(words, freqs, slow_bytes, num_merges)
    assert fast_bytes == slow_bytes and len(fast) == num_merges


@needs_numba
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(words=st.dictionaries(st.binary(min_size=2, max_size=12) | st.text(alphabet="aab", min_size=2).map(str.encode),
                             st.integers(1, 5), max_size=10), num_merges=st.integers(0, 40))
def test_kernel_equals_reference_on_random_words(monkeypatch, words: dict[bytes, int], num_merges: int) -> None:
    monkeypatch.setenv("TINYLM_KERNELS", "1")
    monkeypatch.setattr(bpe_merges, "KERNEL_MIN_SYMBOLS", 0)
    token_bytes = [bytes([i]) for i in range(256)] + [b"<s>"]
    keys, freqs = list(words), list(words.values())
    fast = kernel_merges(keys, freqs, list(token_bytes), num_merges)
    assert fast == learn_merges_reference(keys, freqs, list(token_bytes), num_merges)


def test_long_runs_beside_short_words_match_oracle(tmp_path, kernel_path) -> None:
    text = " ".join([dna(3000, 1), "the cat sat on the mat", dna(700, 2), "aaaa" * 200, EOT, dna(5000, 3)])
    path = tmp_path / "mixed.txt"
    path.write_text(text, encoding="utf-8")
    assert train_bpe(path, 400, [EOT], progress=False) == naive_train(naive_counts(text, [EOT]), 400, [EOT])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(words=st.dictionaries(st.text(alphabet="aab", min_size=2, max_size=12), st.integers(1, 4), max_size=8))
def test_repeated_letters_overlap_like_the_oracle(kernel_path, words: dict[str, int]) -> None:
    # Runs of one letter ("aaaa") overlap with themselves: merges must go leftmost first.
    assert train_bpe(words, 275, [], progress=False) == naive_train(Counter(words), 275, [])


@needs_numba
@pytest.mark.parametrize(("source", "chars", "num_merges"), [
    ("tinystories_valid_small.txt", 800_000, 3000),
    ("multilingual_samples.txt", None, 1500),
])
def test_sentencepiece_kernel_equals_reference_on_corpora(monkeypatch, source, chars, num_merges) -> None:
    monkeypatch.setenv("TINYLM_KERNELS", "1")
    monkeypatch.setattr(bpe_merges, "KERNEL_MIN_SYMBOLS", 0)
    path = PACKAGE_DATA / source if (PACKAGE_DATA / source).is_file() else shared_file(source)
    with open(path, encoding="utf-8") as f:
        counts = count_metaspace_words([f.read(chars)])
    alphabet = [c for c, _ in count_characters(counts)]
    symbols, lengths, freqs = _symbol_words(counts, alphabet)
    runs = []
    for learn in (learn_merges, learn_merges_reference):
        token_bytes = [c.encode("utf-8") for c in alphabet] + [b""]
        shapes = [piece_shape(c) for c in alphabet] + [None]
        if learn is learn_merges:
            pairs = learn(symbols, lengths, freqs, token_bytes, num_merges, shapes)
        else:
            words = np.split(symbols, np.cumsum(lengths)[:-1])
            pairs = learn([w.tolist() for w in words], freqs.tolist(), token_bytes, num_merges, shapes)
        runs.append((pairs, token_bytes, shapes))
    assert runs[0] == runs[1] and len(runs[0][0]) == num_merges


def test_counts_beyond_32_bits_merge_like_the_oracle(kernel_path) -> None:
    # A count of 2**40 needs the kernel's 64-bit links (small counts use 32-bit ones).
    words = {"ab": 2**40, "abc": 3, "az": 2**40 + 1, "zab": 5}
    assert train_bpe(words, 262, [], progress=False) == naive_train(Counter(words), 262, [])


def test_a_small_training_run_does_not_load_numba() -> None:
    # Below KERNEL_MIN_SYMBOLS the reference finishes before numba would have loaded.
    code = ("from tinylm_hf.tokenization.sentencepiece_bpe.train import train_sentencepiece_bpe\n"
            "from tinylm_hf.tokenization.bpe.train import train_bpe\n"
            "train_sentencepiece_bpe({'\u2581aab': 2, '\u2581ab': 1}, 7, byte_fallback=False, progress=False)\n"
            "train_bpe({'hello': 3, 'world': 2}, 262, [], progress=False)")
    assert modules_loaded_by(code, ("numba",)) == []
