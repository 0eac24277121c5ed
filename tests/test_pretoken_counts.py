"""count_pretokens: a file's pre-tokens counted in chunks over worker processes equal the whole text's."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import PACKAGE_DATA, shared_file
from naive_bpe import naive_counts
from tinylm_hf.tokenization.pretokenize import GPT2_PATTERN, GPT4_PATTERN
from tinylm_hf.tokenizer_training import pretoken_counts

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


def test_chunk_boundaries_sit_at_special_token_starts(stories_slice):
    bounds = pretoken_counts.find_chunk_boundaries(str(stories_slice), 8, [EOT], GPT2_PATTERN)
    data = stories_slice.read_bytes()
    assert bounds[0] == 0 and bounds[-1] == len(data) and bounds == sorted(set(bounds))
    assert len(bounds) == 9
    assert all(data[b : b + len(EOT)] == EOT.encode() for b in bounds[1:-1])


def test_chunk_boundary_never_splits_a_longer_special_token(tmp_path):
    # "<|x|>" sits inside "A<|x|>"; a split point falling on the "<" must not cut after "A".
    unit = "some text here " * 3 + "A<|x|>"
    path = write(tmp_path, "nested.txt", unit * 50)
    data = path.read_bytes()
    for num_chunks in range(2, 40):
        bounds = pretoken_counts.find_chunk_boundaries(str(path), num_chunks, ["<|x|>", "A<|x|>"], GPT2_PATTERN)
        assert all(data[b : b + 6] == b"A<|x|>" for b in bounds[1:-1])


def test_newline_chunk_boundaries_sit_between_plain_bytes():
    path = shared_file("corpus.en")
    bounds = pretoken_counts.find_chunk_boundaries(str(path), 8, [], GPT2_PATTERN)
    data = path.read_bytes()
    assert len(bounds) == 9
    assert all(data[b - 1 : b] == b"\n" and data[b - 2 : b - 1].strip() and data[b : b + 1].strip()
               for b in bounds[1:-1])


@pytest.mark.parametrize(
    ("specials", "pattern"),
    [([EOT], GPT2_PATTERN), ([], GPT2_PATTERN), ([], GPT4_PATTERN)],
    ids=["eot", "newline-cuts-gpt2", "newline-cuts-gpt4"],
)
def test_chunked_counts_equal_whole_text_counts(monkeypatch, stories_slice, specials, pattern):
    monkeypatch.setattr(pretoken_counts, "CHUNK_BYTES", 8 << 10)
    counts = pretoken_counts.count_pretokens(str(stories_slice), specials, pattern, num_workers=1)
    assert counts == naive_counts(stories_slice.read_text(encoding="utf-8"), specials, pattern)


@pytest.mark.slow
def test_parallel_counts_on_40mb_corpus_equal_whole_text_counts():
    path = shared_file("pd_novels_heldout.txt")
    two = pretoken_counts.count_pretokens(str(path), [EOT], GPT2_PATTERN, num_workers=2)
    whole = naive_counts(path.read_bytes().decode("utf-8", errors="replace"), [EOT])
    assert two == whole
