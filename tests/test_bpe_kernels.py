"""bpe_kernels: the numba scanner and encoder equal their pure-Python references (the regex, the merge loop)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import PACKAGE_DATA, shared_file
from tinylm_hf.tokenization.bpe.core import BPETokenizer
from tinylm_hf.tokenization.bpe.merge import merge_by_heap, merge_short
from tinylm_hf.tokenization.jit import numba_installed
from tinylm_hf.tokenization.pretokenize import GPT2_PATTERN, GPT4_PATTERN, compile_pretokenizer

pytestmark = pytest.mark.skipif(not numba_installed(), reason="the kernels need numba")
kernels = pytest.importorskip("tinylm_hf.tokenization.bpe.kernels") if numba_installed() else None

EOT = "<|endoftext|>"
PATTERNS = {"gpt2": GPT2_PATTERN, "gpt4": GPT4_PATTERN}
CORPORA = ["tinystories_sample.txt", "multilingual_samples.txt", "corpus.en", "tinystories_valid_small.txt",
           "tiny_shakespeare.txt"]
# Characters where the patterns' alternatives meet: whitespace kinds, contractions in both cases, U+017F
# (folds to "s" in cl100k's case-insensitive contractions), letters/numbers new in Unicode 16 and 17.
TRICKY = " \t\n\r\x0b\x0c\x1c\x85\xa0\u2009\u3000'sdmtlvreSDMTLVREſ aZ09.,!?-é漢字٣²😀\u0301\U00010940\u1c89"
tricky_text = st.text(alphabet=st.sampled_from(TRICKY), max_size=60) | st.text(max_size=60)


def kernel_pretokens(text: str, pattern: str) -> list[str]:
    data = text.encode("utf-8")
    starts, ends = kernels.pretoken_bounds(np.frombuffer(data, dtype=np.uint8), [0, len(data)], pattern == "gpt4")
    return [data[a:b].decode("utf-8") for a, b in zip(starts.tolist(), ends.tolist())]


@pytest.fixture(scope="module")
def gpt2_pair() -> dict[str, tuple[BPETokenizer, BPETokenizer]]:
    """pattern -> (GPT-2's vocabulary on the kernels, the same on the pure-Python reference)."""
    vocab, merges = shared_file("gpt2_vocab.json"), shared_file("gpt2_merges.txt")
    pairs = {}
    for name in PATTERNS:
        fast, slow = (BPETokenizer.from_files(vocab, merges, [EOT], pattern=name) for _ in range(2))
        slow._kernel_pattern = None
        pairs[name] = (fast, slow)
    return pairs


# ------------------------------------------------------------------------------ the scanner
@pytest.mark.parametrize("pattern", list(PATTERNS))
@pytest.mark.parametrize("name", CORPORA)
def test_scanner_equals_regex_on_corpus(pattern: str, name: str) -> None:
    text = shared_file(name).read_text(encoding="utf-8")
    assert kernel_pretokens(text, pattern) == compile_pretokenizer(PATTERNS[pattern]).findall(text)


@pytest.mark.parametrize("pattern", list(PATTERNS))
@settings(max_examples=400, deadline=None)
@given(text=tricky_text)
def test_scanner_equals_regex_on_any_text(pattern: str, text: str) -> None:
    assert kernel_pretokens(text, pattern) == compile_pretokenizer(PATTERNS[pattern]).findall(text)


@pytest.mark.slow
@pytest.mark.parametrize("pattern", list(PATTERNS))
def test_scanner_equals_regex_on_all_of_the_novels(pattern: str) -> None:
    text = shared_file("pd_novels_heldout.txt").read_text(encoding="utf-8")
    assert kernel_pretokens(text, pattern) == compile_pretokenizer(PATTERNS[pattern]).findall(text)


@pytest.mark.parametrize("pattern", list(PATTERNS))
@settings(max_examples=300, deadline=None)
@given(texts=st.lists(tricky_text, min_size=1, max_size=6))
def test_scanner_pretokenizes_each_text_alone(pattern: str, texts: list[str]) -> None:
    pieces = [text.encode("utf-8", "surrogatepass") for text in texts]
    data = b"".join(pieces)
    bounds = np.cumsum([0] + [len(p) for p in pieces])
    starts, ends = kernels.pretoken_bounds(np.frombuffer(data, dtype=np.uint8), bounds, pattern == "gpt4")
    found = [data[a:b].decode("utf-8", "surrogatepass") for a, b in zip(starts.tolist(), ends.tolist())]
    assert found == [p for t in texts for p in compile_pretokenizer(PATTERNS[pattern]).findall(t)]


def test_scanner_reads_lone_surrogates_as_other_characters() -> None:
    text = "a\ud800 \udfffb'\ud800"
    data = text.encode("utf-8", "surrogatepass")
    starts, ends = kernels.pretoken_bounds(np.frombuffer(data, dtype=np.uint8), [0, len(data)], False)
    found = [data[a:b].decode("utf-8", "surrogatepass") for a, b in zip(starts.tolist(), ends.tolist())]
    assert found == compile_pretokenizer(GPT2_PATTERN).findall(text)


@pytest.mark.slow
@pytest.mark.parametrize("pattern", list(PATTERNS))
def test_scanner_equals_regex_around_every_code_point_of_the_first_planes(pattern: str) -> None:
    text = "".join(f"{c}'s {c}{c}1 {c}\n{c}." for c in map(chr, range(0x30000)) if not 0xD800 <= ord(c) < 0xE000)
    assert kernel_pretokens(text, pattern) == compile_pretokenizer(PATTERNS[pattern]).findall(text)


# ------------------------------------------------------------------------------ the encoder
@pytest.mark.parametrize("pattern", list(PATTERNS))
@pytest.mark.parametrize("name", CORPORA)
def test_kernel_encode_equals_reference_on_corpus(gpt2_pair, pattern: str, name: str) -> None:
    fast, slow = gpt2_pair[pattern]
    text = shared_file(name).read_text(encoding="utf-8")
    assert fast.encode(text) == slow.encode(text)


@pytest.mark.parametrize("pattern", list(PATTERNS))
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=tricky_text)
def test_kernel_encode_equals_reference_on_any_text(gpt2_pair, pattern: str, text: str) -> None:
    fast, slow = gpt2_pair[pattern]
    assert fast.encode_ordinary(text) == slow.encode_ordinary(text)


def test_kernel_encode_equals_reference_on_a_trained_vocabulary() -> None:
    from tinylm_hf.tokenization.bpe.train import train_bpe

    text = (PACKAGE_DATA / "tinystories_train_small.txt").read_text(encoding="utf-8")[:200_000]
    vocab, merges = train_bpe([text], 700, [EOT], progress=False)
    fast, slow = BPETokenizer(vocab, merges, [EOT]), BPETokenizer(vocab, merges, [EOT])
    slow._kernel_pattern = None
    other = (PACKAGE_DATA / "tinystories_valid_small.txt").read_text(encoding="utf-8")
    assert fast.encode(other) == slow.encode(other)


def test_whole_lookup_returns_only_entries_the_merge_would_give() -> None:
    # "abc" is in the vocabulary but merges to a + bc: the whole-pre-token shortcut must not return it.
    vocab = {i: bytes([i]) for i in range(256)} | {256: b"bc", 257: b"ab", 258: b"abc"}
    tok = BPETokenizer(vocab, [(b"b", b"c"), (b"a", b"b"), (b"ab", b"c")])
    assert tok.encode("abc") == [97, 256]
    assert tok._kernel is not None


@pytest.mark.parametrize("run", ["a" * 300_000, "ACGT" * 50_000, "世界" * 50_000], ids=["letter", "dna", "cjk"])
def test_long_run_merges_over_the_heap_as_the_loop_does(gpt2_pair, run: str) -> None:
    fast, slow = gpt2_pair["gpt2"]
    assert fast.encode_ordinary(run) == slow.encode_ordinary(run)


@settings(max_examples=200, deadline=None)
@given(word=st.binary(min_size=1, max_size=150))
def test_kernel_merges_equal_the_python_merges(word: bytes) -> None:
    vocab = {i: bytes([i]) for i in range(256)} | {256: b"ab", 257: b"aa", 258: b"aab", 259: b"ba", 260: b"abab"}
    merges = [(b"a", b"b"), (b"a", b"a"), (b"aa", b"b"), (b"b", b"a"), (b"ab", b"ab")]
    tok = BPETokenizer(vocab, merges)
    tok.encode("x")  # builds the kernel's tables
    kernel = tok._kernel
    ids = [tok._byte_ids[b] for b in word]
    expected = merge_short(list(ids), tok.ranks.get, tok._merged_by_rank)
    assert merge_by_heap(list(ids), tok.ranks.get, tok._merged_by_rank) == expected
    out = np.array(ids, dtype=np.int64)
    n = kernels.merge_by_heap(out, 0, len(ids), kernel.pairs, kernel.merged)
    assert out[:n].tolist() == expected
    out = np.array(ids, dtype=np.int64)
    ranks = np.array([kernels.rank_of(a, b, kernel.pairs) for a, b in zip(ids, ids[1:])], dtype=np.int64)
    n = kernels.merge_short(out, 0, len(ids), kernel.pairs, kernel.merged, ranks)
    assert out[:n].tolist() == expected
