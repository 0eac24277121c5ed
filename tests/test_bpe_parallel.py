"""BPETokenizer.encode_file / encode_batch over threads equal one `encode`, and read in bounded windows."""

from __future__ import annotations

import threading
import tracemalloc
from pathlib import Path

import pytest

from conftest import shared_file
from tinylm_hf.tokenization.bpe import core as bpe_module
from tinylm_hf.tokenization.bpe.core import BPETokenizer

EOT = "<|endoftext|>"


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


def chinese_text(chars: int) -> str:
    """Chinese prose without a space: lines of letters and full-width punctuation."""
    line = "联合国大会通过并颁布世界人权宣言，呼吁所有会员国广为宣传。人人生而自由，在尊严和权利上一律平等。\n"
    return (line * (chars // len(line) + 1))[:chars]


def test_encode_file_with_threads_equals_encode(gpt2: BPETokenizer, novels_slice: Path, monkeypatch) -> None:
    monkeypatch.setattr(bpe_module, "WINDOW_CHARS", 100_000)  # many windows in flight
    text = novels_slice.read_text(encoding="utf-8")
    assert EOT in text
    assert gpt2.encode_file(novels_slice, num_workers=2) == gpt2.encode(text)


def test_encode_file_runs_in_threads_not_processes(gpt2: BPETokenizer, novels_slice: Path, monkeypatch) -> None:
    monkeypatch.setattr(bpe_module, "WINDOW_CHARS", 100_000)
    seen = set()
    encode = gpt2.encode
    monkeypatch.setattr(gpt2, "encode", lambda text: seen.add(threading.get_ident()) or encode(text))
    gpt2.encode_file(novels_slice, num_workers=2)
    assert len(seen) == 2


def test_encode_file_without_any_safe_cut_is_one_window(gpt2: BPETokenizer, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(bpe_module, "WINDOW_CHARS", 1000)
    path = tmp_path / "dna.txt"
    path.write_text("ACGT" * 5000, encoding="utf-8")
    assert gpt2.encode_file(path, num_workers=2) == gpt2.encode("ACGT" * 5000)


def test_encode_file_keeps_universal_newlines_like_read_text(gpt2: BPETokenizer, tmp_path: Path) -> None:
    path = tmp_path / "crlf.txt"
    path.write_bytes(b"one\r\ntwo\rthree\n \xff end")
    assert gpt2.encode_file(path, num_workers=1) == gpt2.encode(path.read_text(encoding="utf-8", errors="replace"))


@pytest.mark.parametrize("script", ["novels", "chinese"])
def test_encode_file_memory_does_not_grow_with_the_file(gpt2: BPETokenizer, tmp_path: Path, monkeypatch,
                                                        script: str) -> None:
    monkeypatch.setattr(bpe_module, "WINDOW_CHARS", 250_000)
    text = shared_file("pd_novels_heldout.txt").read_text(encoding="utf-8")[:6_000_000] if script == "novels" \
        else chinese_text(3_000_000)
    path = tmp_path / "big.txt"
    path.write_text(text, encoding="utf-8")
    del text
    windows = []
    monkeypatch.setattr(gpt2, "encode", lambda text, encode=gpt2.encode: windows.append(len(text)) or encode(text))
    gpt2.encode_file(path, num_workers=2)
    assert len(windows) > 10 and max(windows) < 600_000  # windows of about 250k characters, never the file


def test_encode_iterable_reads_chinese_in_bounded_pieces(gpt2: BPETokenizer) -> None:
    text = chinese_text(2_000_000)
    chunks = (text[i : i + 4096] for i in range(0, len(text), 4096))
    read = 0

    def counted():
        nonlocal read
        for chunk in chunks:
            read += len(chunk)
            yield chunk

    stream = gpt2.encode_iterable(counted())
    first = next(stream)
    assert read < 100_000, f"read {read} characters before the first id"
    tracemalloc.start()
    rest = list(stream)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert [first, *rest] == gpt2.encode(text)
    assert peak < 4 * 2**20 + 40 * len(rest), f"peak {peak / 2**20:.1f} MiB"


def test_encode_batch_with_threads_equals_encode_per_text(gpt2: BPETokenizer, novels_slice: Path) -> None:
    docs = novels_slice.read_text(encoding="utf-8").split("\n\n")
    assert gpt2.encode_batch(docs, num_workers=2) == [gpt2.encode(d) for d in docs]


def test_encode_batch_keeps_empty_texts_and_order(gpt2: BPETokenizer) -> None:
    texts = ["", "a b", EOT, "", "x" * 300_000, "end"]
    assert gpt2.encode_batch(texts, num_workers=3) == [gpt2.encode(t) for t in texts]


def test_no_process_pool_code_in_saved_model_folders() -> None:
    from tinylm_hf.remote_code import remote_code_files, remote_ref
    from tinylm_hf.tokenization.bpe.tokenization_tinylm import TinyLMTokenizer

    copied = remote_code_files([remote_ref(TinyLMTokenizer)])
    assert {"bpe_core.py", "bpe_kernels.py", "jit.py"} <= copied
    assert not copied & {"parallel_encode.py", "process_pool.py"}
