"""count_gpt2_pretokens equals the regex and Counter: on the shared corpora, on random text, and
when two pre-tokens share a hash."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import shared_file
from tinylm_hf.tokenizer_training import array_counts
from tinylm_hf.tokenizer_training.array_counts import count_gpt2_pretokens
from tinylm_hf.tokenization.pretokenize import GPT2_PATTERN, compile_pretokenizer, split_on_special_tokens

TRICKY = list(" \t\n\r\xa0\u3000'sdmtlvre09a\u00e9\u4e2d\u0301!.\U0001f600")


def regex_counts(texts: list[str]) -> Counter[str]:
    return Counter(piece for text in texts for piece in compile_pretokenizer(GPT2_PATTERN).findall(text))


@pytest.mark.parametrize("name", ["tinystories_train_small.txt", "pd_novels_heldout.txt", "multilingual_samples.txt"])
def test_counts_equal_the_regex_on_shared_corpora(name: str) -> None:
    with open(shared_file(name), encoding="utf-8") as f:
        parts = split_on_special_tokens(f.read(2_000_000), ["<|endoftext|>"])
    assert count_gpt2_pretokens(parts) == regex_counts(parts)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(st.sampled_from(TRICKY), max_size=30) | st.text(max_size=20), max_size=5))
def test_counts_equal_the_regex_on_random_texts(texts: list[str]) -> None:
    assert count_gpt2_pretokens(texts) == regex_counts(texts)


def test_a_shared_hash_keeps_the_counts_apart(monkeypatch) -> None:
    # Every pre-token hashes alike: the representative absorbs nothing it is not equal to.
    monkeypatch.setattr(array_counts, "hash_spans", lambda points, starts, ends: np.zeros(len(starts), dtype=np.uint64))
    texts = ["the cat and the dog", " cat"]
    assert count_gpt2_pretokens(texts) == regex_counts(texts)
