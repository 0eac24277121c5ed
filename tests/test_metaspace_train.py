"""metaspace_train: the words sentencepiece trains on, and counting them fast."""

from __future__ import annotations

import tracemalloc
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import shared_file
from tinylm_hf.tokenization import metaspace, pretoken_counts
from tinylm_hf.tokenization.jit import kernels_enabled
from tinylm_hf.tokenization.metaspace.sentencepiece_model import to_metaspace
from tinylm_hf.tokenization.piece_rules import UNMERGEABLE_CHARS
from tinylm_hf.tokenization.metaspace.train import (
    count_characters,
    count_metaspace_words,
    split_metaspace_words,
    split_words,
)

TEXT = st.text(alphabet=st.sampled_from(list("ab ▁\n\t1,é\u0301漢")), max_size=40)


def test_words_are_cut_before_each_space_symbol_line_by_line():
    assert split_metaspace_words("The cat  sat.\n\nIt ran ") == ["▁The", "▁cat", "▁", "▁sat.", "▁It", "▁ran", "▁"]


@given(TEXT)
@settings(max_examples=100, deadline=None)
def test_fast_word_counting_equals_the_word_split(text):
    per_line = [w for line in text.split("\n") if line for w in split_words(to_metaspace(line))]
    assert split_metaspace_words(text) == per_line
    assert count_metaspace_words([text]) == Counter(per_line)


def test_word_counts_equal_the_per_line_split_on_real_text():
    texts = [shared_file(name).read_text(encoding="utf-8") for name in ("multilingual_samples.txt", "corpus.en")]
    texts.append(texts[1][:20_000].replace("the ", "▁the ▁").replace("and", "a▁nd"))  # literal `▁`s start words
    per_line = Counter(w for text in texts for line in text.split("\n") if line for w in split_words(to_metaspace(line)))
    assert count_metaspace_words(iter(texts)) == per_line


def kernel_counts(texts: list[str], num_workers: int = 2) -> Counter[str]:
    """`count_metaspace_words` on the kernels from the first character (the reference counts what comes before
    `KERNEL_MIN_CHARS` while numba is not loaded)."""
    if not kernels_enabled():
        pytest.skip("the kernels' word counts (numba)")
    limit = metaspace.train.KERNEL_MIN_CHARS
    metaspace.train.KERNEL_MIN_CHARS = 0
    try:
        return count_metaspace_words(texts, num_workers=num_workers)
    finally:
        metaspace.train.KERNEL_MIN_CHARS = limit


@given(st.lists(TEXT | st.text(max_size=20), max_size=6))
@settings(max_examples=200, deadline=None)
def test_kernel_word_counts_equal_the_reference_on_random_texts(texts):
    reference = Counter(word for text in texts for word in split_metaspace_words(text))
    assert kernel_counts(texts, num_workers=1) == reference


def test_kernel_word_counts_equal_the_reference_on_real_text():
    texts = [shared_file(name).read_text(encoding="utf-8") for name in ("multilingual_samples.txt", "corpus.en")]
    texts.append(texts[1][:20_000].replace("the ", "▁the ▁").replace("and", "a▁nd"))  # literal `▁`s start words
    with open(shared_file("pd_novels_heldout.txt"), encoding="utf-8") as f:
        texts += [f.read(1_500_000) for _ in range(3)]  # batches on two threads, summed
    assert kernel_counts(texts) == count_metaspace_words(texts)


def test_texts_given_one_at_a_time_are_counted_in_batches_as_an_iterable_is(monkeypatch):
    monkeypatch.setattr(metaspace.train, "BATCH_CHARS", 1 << 14)
    monkeypatch.setattr(metaspace.train, "KERNEL_MIN_CHARS", 1 << 16)  # the reference first, then the kernels
    lines = shared_file("tiny_shakespeare.txt").read_text(encoding="utf-8").splitlines()[:8000]
    counter = metaspace.train.MetaspaceWordCounter()
    for line in lines:
        counter.add(line)
    assert counter.counts() == Counter(word for line in lines for word in split_metaspace_words(line))


@pytest.mark.parametrize("kernels", ["0", "1"])
def test_word_counting_holds_no_more_than_the_counts(kernels, monkeypatch):
    monkeypatch.setenv("TINYLM_KERNELS", kernels)
    monkeypatch.setattr(metaspace.train, "KERNEL_MIN_CHARS", 0)
    # the texts in hand, and the words turned into strings at a time: bounded, and small beside this corpus's words
    monkeypatch.setattr(metaspace.train, "BATCH_CHARS", 1 << 15)
    monkeypatch.setattr(pretoken_counts, "SPANS_PER_SLICE", 1 << 10)
    lines = shared_file("tiny_shakespeare.txt").read_text(encoding="utf-8").splitlines()
    tracemalloc.start()
    try:
        counts = count_metaspace_words(iter(lines))
        held, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(counts) > 20_000
    assert peak - held < 0.4 * held, f"counting held {(peak - held) / 1e6:.1f} MB beyond its {held / 1e6:.1f} MB of counts"


def test_character_counts_equal_a_per_character_count_on_real_text(bundled_train_path):
    counts = count_metaspace_words([bundled_train_path.read_text(encoding="utf-8")[:200_000]])
    counts["▁\u4e2d\U0001f600"] = 3  # code points beyond Latin-1 and the BMP
    counts["▁ζ"] = 0  # a word counted 0 still puts its characters in the alphabet, with 0
    naive: Counter[str] = Counter()
    for word, count in counts.items():
        for char in word:
            naive[char] += count
    expected = sorted(((c, n) for c, n in naive.items() if c not in UNMERGEABLE_CHARS), key=lambda item: (-item[1], item[0]))
    assert count_characters(counts) == expected
