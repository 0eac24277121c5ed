"""count_pretokens: a file's pre-tokens counted in chunks over threads equal the whole text's; the span counts (the
kernel) equal the regex and Counter."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import PACKAGE_DATA, shared_file
from kernel_paths import kernel_path  # noqa: F401
from naive_bpe import naive_counts
from tinylm_hf.tokenization.jit import kernels_enabled
from tinylm_hf.tokenization.pretokenize import GPT2_PATTERN, GPT4_PATTERN, compile_pretokenizer, split_on_special_tokens
from tinylm_hf.tokenization import pretoken_counts

TRICKY = list(" \t\n\r\xa0\u3000'sdmtlvre09a\u00e9\u4e2d\u0301!.\U0001f600")

EOT = "<|endoftext|>"


def write(tmp_path: Path, name: str, data: str) -> Path:
    path = tmp_path / name
    path.write_text(data, encoding="utf-8")
    return path


@pytest.fixture
def stories_slice(tmp_path) -> Path:
    """About 120 KB of the bundled TinyStories (documents separated by <|endoftext|>)."""
    text = (PACKAGE_DATA / "tinystories_valid_small.txt").read_text(encoding="utf-8")[:120_000]
    return write(tmp_path, "stories.txt", text)


def _at_special_or_safe_cut(data: bytes, bound: int) -> bool:
    """At a special token, after a newline between two plain bytes, or before a space after a plain byte."""
    plain = lambda at: 0x21 <= data[at] <= 0x7E  # noqa: E731
    newline = data[bound - 1 : bound] == b"\n" and plain(bound - 2) and plain(bound)
    space = data[bound : bound + 1] == b" " and plain(bound - 1)
    return data[bound : bound + len(EOT)] == EOT.encode() or newline or space


def test_chunk_boundaries_sit_at_special_token_starts_or_safe_cuts(stories_slice):
    bounds = pretoken_counts.find_chunk_boundaries(str(stories_slice), 8, [EOT], GPT2_PATTERN)
    data = stories_slice.read_bytes()
    assert bounds[0] == 0 and bounds[-1] == len(data) and bounds == sorted(set(bounds))
    assert len(bounds) == 9
    assert all(_at_special_or_safe_cut(data, b) for b in bounds[1:-1])


def test_a_file_without_its_special_tokens_is_still_cut_into_chunks(tmp_path):
    """Special tokens named but absent (a corpus without separators): the file is cut at safe cuts, not read as
    one chunk (issue 38: 908 MB of source code counted as one chunk peaked at 8 GB)."""
    path = write(tmp_path, "code.txt", (PACKAGE_DATA / "tinystories_valid_small.txt").read_text(
        encoding="utf-8")[:120_000].replace(EOT, "x = 1"))
    bounds = pretoken_counts.find_chunk_boundaries(str(path), 8, [EOT], GPT2_PATTERN)
    assert len(bounds) == 9
    assert all(_at_special_or_safe_cut(path.read_bytes(), b) for b in bounds[1:-1])


def test_one_long_line_is_cut_before_its_spaces(tmp_path):
    """A file of one line (minified code, a log without newlines) is cut before a space after a plain byte, where
    GPT-2's and cl100k's pre-tokens also end (`has_safe_cuts`)."""
    path = write(tmp_path, "line.txt", "var x = f(a, b); " * 10_000)
    bounds = pretoken_counts.find_chunk_boundaries(str(path), 8, [EOT], GPT2_PATTERN)
    assert len(bounds) == 9 and all(_at_special_or_safe_cut(path.read_bytes(), b) for b in bounds[1:-1])


def test_chunk_boundary_never_splits_a_longer_special_token(tmp_path):
    # "<|x|>" sits inside "A<|x|>"; a split point falling on the "<" must not cut after "A".
    unit = "some text here " * 3 + "A<|x|>"
    path = write(tmp_path, "nested.txt", unit * 50)
    data = path.read_bytes()
    for num_chunks in range(2, 40):
        bounds = pretoken_counts.find_chunk_boundaries(str(path), num_chunks, ["<|x|>", "A<|x|>"], GPT2_PATTERN)
        assert all(data[b : b + 6] == b"A<|x|>" or data[b : b + 1] == b" " for b in bounds[1:-1])


def test_chunk_boundaries_without_special_tokens_sit_at_safe_cuts():
    path = shared_file("corpus.en")
    bounds = pretoken_counts.find_chunk_boundaries(str(path), 8, [], GPT2_PATTERN)
    assert len(bounds) == 9
    assert all(_at_special_or_safe_cut(path.read_bytes(), b) for b in bounds[1:-1])


@pytest.mark.parametrize(
    ("specials", "pattern"),
    [([EOT], GPT2_PATTERN), ([], GPT2_PATTERN), ([], GPT4_PATTERN), (["<|absent|>"], GPT4_PATTERN)],
    ids=["eot", "newline-cuts-gpt2", "newline-cuts-gpt4", "absent-special-gpt4"],
)
@pytest.mark.parametrize("workers", [1, 2], ids=["one-thread", "two-threads"])
def test_chunked_counts_equal_whole_text_counts(monkeypatch, kernel_path, stories_slice, specials, pattern, workers):
    monkeypatch.setattr(pretoken_counts, "CHUNK_BYTES", 8 << 10)
    counts = pretoken_counts.count_pretokens(str(stories_slice), specials, pattern, num_workers=workers)
    assert counts == naive_counts(stories_slice.read_text(encoding="utf-8"), specials, pattern)


@pytest.mark.slow
def test_parallel_counts_on_40mb_corpus_equal_whole_text_counts():
    path = shared_file("pd_novels_heldout.txt")
    two = pretoken_counts.count_pretokens(str(path), [EOT], GPT2_PATTERN, num_workers=2)
    assert sum(two.values()) > 8_000_000
    whole = naive_counts(path.read_bytes().decode("utf-8", errors="replace"), [EOT])
    assert two == whole


def regex_counts(texts: list[str], pattern: str = GPT2_PATTERN) -> Counter[str]:
    return Counter(piece for text in texts for piece in compile_pretokenizer(pattern).findall(text))


def span_counts(texts: list[str], gpt4: bool = False) -> Counter[str]:
    if not kernels_enabled():
        pytest.skip("the span counts are the kernels' (numba)")
    return pretoken_counts.spans_to_counter(pretoken_counts._count_spans(texts, gpt4))


@pytest.mark.parametrize("name", ["tinystories_train_small.txt", "pd_novels_heldout.txt", "multilingual_samples.txt"])
def test_gpt2_counts_equal_the_regex_on_shared_corpora(name: str) -> None:
    with open(shared_file(name), encoding="utf-8") as f:
        parts = split_on_special_tokens(f.read(2_000_000), [EOT])
    assert span_counts(parts) == regex_counts(parts)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(st.sampled_from(TRICKY), max_size=30) | st.text(max_size=20), max_size=5))
def test_gpt2_counts_equal_the_regex_on_random_texts(texts: list[str]) -> None:
    assert span_counts(texts) == regex_counts(texts)


def test_byte_arrays_hold_the_same_counts(kernel_path) -> None:
    path = shared_file("multilingual_samples.txt")
    symbols, lengths, counts = pretoken_counts.count_pretoken_bytes(str(path), [EOT], GPT2_PATTERN, num_workers=2)
    ends = np.cumsum(lengths).tolist()
    words = [symbols[a:b].tobytes().decode("utf-8") for a, b in zip([0] + ends[:-1], ends)]
    assert dict(zip(words, counts.tolist())) == naive_counts(path.read_text(encoding="utf-8"), [EOT])


@pytest.mark.parametrize("name", ["multilingual_samples.txt", "tinystories_valid_small.txt"])
def test_cl100k_file_counts_equal_the_regex(kernel_path, name: str) -> None:
    path = shared_file(name)
    counts = pretoken_counts.count_pretokens(str(path), [EOT], GPT4_PATTERN, num_workers=2)
    assert counts == naive_counts(path.read_text(encoding="utf-8"), [EOT], GPT4_PATTERN)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(st.sampled_from(TRICKY + ["\u017f", "S", "1", "\r"]), max_size=30) | st.text(max_size=20),
                max_size=5))
def test_cl100k_span_counts_equal_the_regex_on_random_texts(texts: list[str]) -> None:
    assert span_counts(texts, gpt4=True) == regex_counts(texts, GPT4_PATTERN)
