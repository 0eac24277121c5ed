"""Bounded memory on a real corpus larger than its blocks: ten times the text, about the same peak (issue 38).

Slow (a 200 MB corpus is made from this machine's installed packages by scripts/make_big_corpus.py, then prepare
runs twice in a fresh process); run with `-m slow`. Only `prepare` holds no more for more text: the tokenizer
commands hold the distinct words, which grew 2.4-5.8x for 10x the text (docs/benchmarks/tokenizers.md). The peaks are measured as scripts/bench_memory.py measures them:
the RSS of the whole process tree, polled, or the process's own high-water mark.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from conftest import REPO_ROOT, shared_file

pytestmark = pytest.mark.slow

LARGE_MB, SMALL_MB = 200, 20
MAX_RATIO = 1.3  # the peak on ten times the text stays within this of the peak on the smaller corpus


def _script(name: str):
    spec = importlib.util.spec_from_file_location(name, REPO_ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def corpora(tmp_path_factory) -> tuple[Path, Path]:
    """(20 MB, 200 MB) of real text, the first a prefix of the second."""
    make = _script("make_big_corpus")
    folder = tmp_path_factory.mktemp("bigcorpus")
    paths = (folder / "small.txt", folder / "large.txt")
    for path, size in zip(paths, (SMALL_MB, LARGE_MB)):
        make.make_corpus(path, list(make.ROOTS), size)
    if paths[1].stat().st_size < 0.9 * LARGE_MB * 1e6:
        pytest.skip(f"this machine's packages hold less than {LARGE_MB} MB of text")
    return paths


def test_prepare_s_peak_memory_stays_flat_on_ten_times_the_text(tmp_path, corpora):
    from tinylm_hf.tokenization.bpe.tokenization_tinylm import TinyLMTokenizer

    bench = _script("bench_memory")
    TinyLMTokenizer(vocab_file=str(shared_file("gpt2_vocab.json")),
                    merges_file=str(shared_file("gpt2_merges.txt"))).save_pretrained(tmp_path / "tok")
    options = type("Options", (), {"tokenizer": tmp_path / "tok", "workers": 2, "vocab_size": 32000})
    peaks = []
    for label, corpus in zip(("small", "large"), corpora):
        (tmp_path / label).mkdir()
        peaks.append(bench.measure(bench.command("prepare", corpus, tmp_path / label, options))[1])
    small, large = peaks
    assert large <= MAX_RATIO * small, f"prepare: {small:.0f} MB on {SMALL_MB} MB, {large:.0f} MB on {LARGE_MB} MB"
