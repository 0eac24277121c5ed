"""Long pre-tokens in BPE training (bpe_train_long): same merges as the naive oracle, by position."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import shared_file
from naive_bpe import naive_counts, naive_train
from tinylm_hf.tokenizer_training import bpe_train
from tinylm_hf.tokenizer_training.bpe_train import train_bpe, train_bpe_from_counts

EOT = "<|endoftext|>"


def dna(length: int, seed: int = 0) -> str:
    """Random "ACGT" text: one pre-token of `length` bytes under GPT-2's pattern."""
    rng = random.Random(seed)
    return "".join(rng.choice("ACGT") for _ in range(length))


@pytest.fixture(scope="module")
def corpus_en_oracle() -> tuple[Path, tuple]:
    path = shared_file("corpus.en")
    return path, naive_train(naive_counts(path.read_text(encoding="utf-8"), [EOT]), 500, [EOT])


@pytest.mark.parametrize("threshold", [2, 3, 7], ids=lambda t: f"long-from-{t}-bytes")
def test_every_word_in_the_arena_matches_oracle(monkeypatch, corpus_en_oracle, threshold: int) -> None:
    monkeypatch.setattr(bpe_train, "LONG_WORD_BYTES", threshold)
    path, expected = corpus_en_oracle
    assert train_bpe(path, 500, [EOT], progress=False) == expected


def test_long_runs_beside_short_words_match_oracle(tmp_path: Path) -> None:
    text = " ".join([dna(3000, 1), "the cat sat on the mat", dna(700, 2), "aaaa" * 200, EOT, dna(5000, 3)])
    path = tmp_path / "mixed.txt"
    path.write_text(text, encoding="utf-8")
    assert train_bpe(path, 400, [EOT], progress=False) == naive_train(naive_counts(text, [EOT]), 400, [EOT])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(words=st.dictionaries(st.text(alphabet="aab", min_size=2, max_size=12), st.integers(1, 4), max_size=8))
def test_repeated_letters_overlap_like_the_oracle(monkeypatch, words: dict[str, int]) -> None:
    # Runs of one letter ("aaaa") overlap with themselves: merges must go leftmost first.
    monkeypatch.setattr(bpe_train, "LONG_WORD_BYTES", 2)
    expected = naive_train(Counter(words), 275, [])
    assert train_bpe_from_counts(words, 275, []) == expected
