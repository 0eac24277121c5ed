"""parallel_encode: encode_file / encode_batch over worker processes equal one `encode`, in bounded memory."""

from __future__ import annotations

import tracemalloc
from array import array
from itertools import chain
from pathlib import Path

import pytest
from transformers.dynamic_module_utils import get_relative_import_files

from conftest import shared_file
from tinylm_hf.tokenization import parallel_encode
from tinylm_hf.tokenization.bpe import BPETokenizer
from tinylm_hf.tokenization.parallel_encode import encode_file, encode_file_blocks

EOT = "<|endoftext|>"
TOKENIZATION_DIR = Path(parallel_encode.__file__).parent


@pytest.fixture(scope="module")
def gpt2() -> BPETokenizer:
    return BPETokenizer.from_files(shared_file("gpt2_vocab.json"), shared_file("gpt2_merges.txt"), [EOT])


@pytest.fixture(scope="module")
def novels_slice(tmp_path_factory) -> Path:
    """3 MB of novels (documents separated by the special token, indented lines, curly quotes)."""
    text = shared_file("pd_novels_heldout.txt").read_text(encoding="utf-8")
    start = text.index(EOT, 2_000_000) - 1_500_000
    path = tmp_path_factory.mktemp("novels") / "slice.txt"
    path.write_text(text[start : start + 3_000_000], encoding="utf-8")
    return path


def test_encode_file_with_workers_equals_encode(gpt2: BPETokenizer, novels_slice: Path) -> None:
    text = novels_slice.read_text(encoding="utf-8")
    assert EOT in text
    assert encode_file(gpt2, novels_slice, num_workers=2) == gpt2.encode(text)


def test_encode_file_blocks_are_uint32_in_file_order(gpt2: BPETokenizer, novels_slice: Path, monkeypatch) -> None:
    monkeypatch.setattr(parallel_encode, "WINDOW_CHARS", 100_000)
    blocks = list(encode_file_blocks(gpt2, novels_slice, num_workers=2))
    assert len(blocks) > 10
    assert all(isinstance(b, array) and b.typecode == "I" for b in blocks)
    assert list(chain.from_iterable(blocks)) == gpt2.encode(novels_slice.read_text(encoding="utf-8"))


def test_encode_file_without_any_safe_cut_is_one_window(gpt2: BPETokenizer, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(parallel_encode, "WINDOW_CHARS", 1000)
    monkeypatch.setattr(parallel_encode, "PARALLEL_MIN_CHARS", 0)
    path = tmp_path / "dna.txt"
    path.write_text("ACGT" * 5000, encoding="utf-8")
    assert encode_file(gpt2, path, num_workers=2) == gpt2.encode("ACGT" * 5000)


def test_encode_file_keeps_universal_newlines_like_read_text(gpt2: BPETokenizer, tmp_path: Path) -> None:
    path = tmp_path / "crlf.txt"
    path.write_bytes(b"one\r\ntwo\rthree\n \xff end")
    assert encode_file(gpt2, path, num_workers=1) == gpt2.encode(path.read_text(encoding="utf-8", errors="replace"))


def test_encode_file_memory_does_not_grow_with_the_file(gpt2: BPETokenizer, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(parallel_encode, "WINDOW_CHARS", 250_000)
    text = shared_file("pd_novels_heldout.txt").read_text(encoding="utf-8")[:12_000_000]
    path = tmp_path / "big.txt"
    path.write_text(text, encoding="utf-8")
    del text
    tracemalloc.start()
    try:
        count = sum(len(block) for block in encode_file_blocks(gpt2, path, num_workers=2))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert count > 2_000_000
    # A few windows of 250k characters in flight: far below the 12 MB file or its 12 MB of ids.
    assert peak < 8 * 2**20, f"peak {peak / 2**20:.1f} MiB while encoding a 12 MB file"


def test_encode_batch_with_workers_equals_encode_per_text(gpt2: BPETokenizer, novels_slice: Path) -> None:
    docs = novels_slice.read_text(encoding="utf-8").split("\n\n")
    assert parallel_encode.encode_batch(gpt2, docs, num_workers=2) == [gpt2.encode(d) for d in docs]


def test_pool_code_stays_out_of_saved_model_folders() -> None:
    copied = {Path(f).name for f in get_relative_import_files(str(TOKENIZATION_DIR / "tokenization_tinylm.py"))}
    assert "bpe.py" in copied
    assert not copied & {"parallel_encode.py", "process_pool.py"}
