"""BPETokenizer: merge-by-rank encoding, special tokens, streaming, parallel paths, GPT-2 files vs tiktoken."""

from __future__ import annotations

import itertools
import json
import pickle
import random
import tracemalloc
from pathlib import Path

import pytest
import tiktoken
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import PACKAGE_DATA, shared_file
from tinylm_hf.tokenization.bpe import core as bpe_module
from tinylm_hf.tokenization.bpe.core import BPETokenizer
from tinylm_hf.tokenization.bpe.gpt2_files import load_merges_txt, load_vocab_json
from tinylm_hf.tokenization.pretokenize import (
    GPT2_PATTERN,
    GPT4_PATTERN,
    compile_pretokenizer,
    find_safe_cut,
    pretokenize_gpt2,
)

EOT = "<|endoftext|>"
BYTES_VOCAB = {i: bytes([i]) for i in range(256)}
# Characters that stress the pre-tokenizer: ASCII whitespace and the \x1c-\x1f separators (stdlib
# `re` calls them whitespace, `regex` does not), Unicode spaces, letters, digits, accents, emoji.
TRICKY = " \t\n\r\x0b\x0c\x1c\x1d\x1e\x1f\x85\xa0\u2009\u3000'sdmtlvre aZ09.,!?-é漢字٣²😀\u0301\U00010940\u1c89"
tricky_text = st.text(alphabet=st.sampled_from(TRICKY), max_size=60) | st.text(max_size=40)


@pytest.fixture(scope="module", params=["kernels", "reference"])
def gpt2(request) -> BPETokenizer:
    """GPT-2's tokenizer on the kernel path, and on its pure-Python reference (numba absent)."""
    tok = BPETokenizer.from_files(shared_file("gpt2_vocab.json"), shared_file("gpt2_merges.txt"), [EOT])
    return tok if request.param == "kernels" else reference_path(tok)


def reference_path(tok: BPETokenizer) -> BPETokenizer:
    """`tok`, made to run the pure-Python reference whatever is installed."""
    tok._kernel_pattern = None
    return tok


@pytest.fixture(scope="module")
def reference(gpt2: BPETokenizer) -> tiktoken.Encoding:
    """tiktoken's GPT-2 encoding built from the same files (no network)."""
    ranks = {token: i for i, token in gpt2.vocab.items() if i != gpt2.special_ids[EOT]}
    return tiktoken.Encoding(
        "gpt2-local", pat_str=GPT2_PATTERN, mergeable_ranks=ranks, special_tokens={EOT: 50256}
    )


# ------------------------------------------------------------------------------ hand-checkable
def test_minbpe_case_three_merges() -> None:
    vocab = BYTES_VOCAB | {256: b"aa", 257: b"aaa", 258: b"aaab"}
    tok = BPETokenizer(vocab, [(b"a", b"a"), (b"aa", b"a"), (b"aaa", b"b")])
    assert tok.encode("aaabdaaabac") == [258, 100, 258, 97, 99]


def test_merges_apply_by_rank_not_by_length() -> None:
    # "bc" is learned first, so "abc" becomes a + bc even though "abc" is a token.
    vocab = BYTES_VOCAB | {256: b"bc", 257: b"ab", 258: b"abc"}
    tok = BPETokenizer(vocab, [(b"b", b"c"), (b"a", b"b"), (b"ab", b"c")])
    assert tok.encode("abc") == [97, 256]
    assert tok.encode("abd") == [257, 100]


def test_no_merge_crosses_a_pretoken() -> None:
    vocab = BYTES_VOCAB | {256: b"a "}
    tok = BPETokenizer(vocab, [(b"a", b" ")])
    assert tok.encode("a b") == [97, 32, 98]


def test_special_token_missing_from_vocab_gets_next_id() -> None:
    tok = BPETokenizer(BYTES_VOCAB, [], [EOT])
    assert tok.special_ids == {EOT: 256}
    assert tok.encode(f"a{EOT}b") == [97, 256, 98]


_VARIANTS: dict[str, BPETokenizer] = {}


def _gpt2_variant(gpt2: BPETokenizer, pattern: str) -> BPETokenizer:
    """GPT-2's vocab with overlapping special tokens and the given pattern (built once)."""
    key = (pattern, gpt2._kernel_pattern is None)
    if key not in _VARIANTS:
        variant = BPETokenizer(gpt2.vocab, gpt2.merges, [EOT, EOT + EOT], pattern=pattern)
        _VARIANTS[key] = reference_path(variant) if key[1] else variant
    return _VARIANTS[key]


@pytest.fixture(scope="module")
def gpt2_double(gpt2: BPETokenizer) -> BPETokenizer:
    """GPT-2 with two overlapping special tokens."""
    double = BPETokenizer(gpt2.vocab, gpt2.merges, [EOT, EOT + EOT])
    return double if gpt2._kernel_pattern is not None else reference_path(double)


def test_overlapping_special_tokens_longest_wins(gpt2_double: BPETokenizer) -> None:
    double, tok = EOT + EOT, gpt2_double
    ids = tok.encode(f"Hi{double}there{EOT}")
    assert ids.count(tok.special_ids[double]) == 1
    assert ids.count(tok.special_ids[EOT]) == 1
    assert tok.decode(ids) == f"Hi{double}there{EOT}"


def test_encode_ordinary_treats_special_text_as_plain(gpt2: BPETokenizer, reference) -> None:
    text = f"a{EOT}b"
    assert gpt2.encode_ordinary(text) == reference.encode_ordinary(text)
    assert gpt2.special_ids[EOT] not in gpt2.encode_ordinary(text)


def test_decode_lone_invalid_byte_gives_replacement(gpt2: BPETokenizer) -> None:
    lone = gpt2.token_to_id[b"\xe2"]
    assert gpt2.decode([lone]) == "\ufffd"


def test_decode_unknown_id_raises(gpt2: BPETokenizer) -> None:
    with pytest.raises(ValueError, match="not in the vocabulary"):
        gpt2.decode([1, 10**9])


def test_vocab_without_all_bytes_is_rejected() -> None:
    with pytest.raises(ValueError, match="single-byte"):
        BPETokenizer({0: b"a"}, [])


# ------------------------------------------------------------------------------ GPT-2 vs tiktoken
SMALL_FILES = ["tinystories_sample.txt", "multilingual_samples.txt", "corpus.en",
               "tinystories_valid_small.txt", "tiny_shakespeare.txt"]
SLOW_FILES = ["tinystories_train_small.txt", "pd_novels_heldout.txt"]


def _read_corpus(name: str) -> str:
    text = shared_file(name).read_text(encoding="utf-8")
    return text[: 5 * 2**20] if name == "pd_novels_heldout.txt" else text


@pytest.mark.parametrize(
    "name", SMALL_FILES + [pytest.param(n, marks=pytest.mark.slow) for n in SLOW_FILES]
)
def test_gpt2_encode_equals_tiktoken_on_corpus(gpt2: BPETokenizer, reference, name: str) -> None:
    text = _read_corpus(name)
    ids = gpt2.encode(text)
    assert ids == reference.encode(text, allowed_special={EOT})
    assert gpt2.decode(ids) == text


def test_gpt2_files_load_as_gpt2(gpt2: BPETokenizer) -> None:
    assert len(gpt2.vocab) == 50257 and len(gpt2.merges) == 50000
    assert gpt2.special_ids == {EOT: 50256}
    assert gpt2.encode("Hello world") == [15496, 995]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=tricky_text)
def test_encode_equals_tiktoken_on_generated_text(gpt2: BPETokenizer, reference, text: str) -> None:
    assert gpt2.encode_ordinary(text) == reference.encode_ordinary(text)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(parts=st.lists(tricky_text | st.just(EOT), max_size=5))
def test_decode_encode_round_trip(gpt2: BPETokenizer, parts: list[str]) -> None:
    text = "".join(parts)
    assert gpt2.decode(gpt2.encode(text)) == text


# ------------------------------------------------------------------------------ pre-tokenization
@settings(max_examples=500, deadline=None)
@given(text=tricky_text)
def test_fast_pretokenizer_equals_regex(text: str) -> None:
    assert pretokenize_gpt2(text) == compile_pretokenizer(GPT2_PATTERN).findall(text)


@settings(max_examples=300, deadline=None)
@given(text=st.text(alphabet=st.characters(max_codepoint=127), max_size=80))
def test_fast_pretokenizer_equals_regex_on_ascii(text: str) -> None:
    assert pretokenize_gpt2(text) == compile_pretokenizer(GPT2_PATTERN).findall(text)


@pytest.mark.parametrize("name", SMALL_FILES)
def test_fast_pretokenizer_equals_regex_on_corpus(name: str) -> None:
    text = _read_corpus(name)
    assert pretokenize_gpt2(text) == compile_pretokenizer(GPT2_PATTERN).findall(text)


@pytest.mark.parametrize("pattern", [GPT2_PATTERN, GPT4_PATTERN], ids=["gpt2", "gpt4"])
@settings(max_examples=300, deadline=None)
@given(text=tricky_text, end=st.integers(0, 80))
def test_safe_cut_splits_pretokens_exactly(pattern: str, text: str, end: int) -> None:
    cut = find_safe_cut(text, 0, end)
    if cut > 0:
        split = compile_pretokenizer(pattern).findall
        assert split(text[:cut]) + split(text[cut:]) == split(text)


# ------------------------------------------------------------------------------ streaming
def test_encode_iterable_over_file_lines_equals_encode(gpt2: BPETokenizer) -> None:
    path = shared_file("tinystories_sample.txt")
    with open(path, encoding="utf-8") as f:
        streamed = list(gpt2.encode_iterable(f))
    assert streamed == gpt2.encode(path.read_text(encoding="utf-8"))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(parts=st.lists(tricky_text | st.just(EOT) | st.just(EOT[:5]), max_size=8), data=st.data())
@pytest.mark.parametrize("pattern", ["gpt2", "gpt4"])
def test_encode_iterable_any_chunking_equals_encode(gpt2, monkeypatch, pattern, parts, data) -> None:
    # A tiny flush size makes every chunk boundary a candidate cut, special tokens split included.
    monkeypatch.setattr(bpe_module, "STREAM_FLUSH_CHARS", 4)
    tok = _gpt2_variant(gpt2, pattern)
    text = "".join(parts)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(text)), max_size=12)))
    chunks = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)])]
    assert list(tok.encode_iterable(chunks)) == tok.encode(text)


def test_encode_iterable_single_huge_line_equals_encode(gpt2: BPETokenizer) -> None:
    text = shared_file("tinystories_sample.txt").read_text(encoding="utf-8").replace("\n", "  ") * 20
    chunks = (text[i : i + 1000] for i in range(0, len(text), 1000))
    assert list(gpt2.encode_iterable(chunks)) == gpt2.encode(text)


def test_encode_iterable_memory_is_bounded(gpt2: BPETokenizer) -> None:
    line = shared_file("tinystories_sample.txt").read_text(encoding="utf-8").replace("\n", " ")
    repeats = (4 * 2**20) // len(line)  # a 4 MB stream with no newline at all
    chunks = itertools.repeat(line, repeats)
    list(gpt2.encode_iterable([line]))  # warm the pre-token cache outside the measurement
    tracemalloc.start()
    count = sum(1 for _ in gpt2.encode_iterable(chunks))
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert count > 5 * 10**5
    assert peak < 2**20, f"peak {peak} bytes while streaming {repeats * len(line)} characters"


def test_pretoken_cache_stays_bounded(gpt2: BPETokenizer, reference, monkeypatch) -> None:
    monkeypatch.setattr(bpe_module, "CACHE_LIMIT", 100)
    tok = reference_path(BPETokenizer(gpt2.vocab, gpt2.merges))
    text = shared_file("tinystories_sample.txt").read_text(encoding="utf-8")
    for part in (text, text[::-1]):
        assert tok.encode(part) == reference.encode_ordinary(part)
        assert 0 < len(tok._cache) <= 100


# ------------------------------------------------------------------------------ parallel
def test_encode_file_equals_encode_on_documents(gpt2: BPETokenizer) -> None:
    path = PACKAGE_DATA / "tinystories_train_small.txt"
    assert gpt2.encode_file(path, num_workers=2) == gpt2.encode(path.read_text(encoding="utf-8"))


def test_encode_file_equals_encode_without_special_tokens(gpt2: BPETokenizer) -> None:
    path = shared_file("tiny_shakespeare.txt")
    assert gpt2.encode_file(path, num_workers=2) == gpt2.encode(path.read_text(encoding="utf-8"))


def test_encode_batch_equals_encode_per_text(gpt2: BPETokenizer) -> None:
    text = (PACKAGE_DATA / "tinystories_train_small.txt").read_text(encoding="utf-8")
    docs = text.split(EOT)[:2000]
    assert gpt2.encode_batch(docs, num_workers=2) == [gpt2.encode(d) for d in docs]


def test_encode_batch_rejects_bad_worker_count(gpt2: BPETokenizer) -> None:
    with pytest.raises(ValueError, match="num_workers"):
        gpt2.encode_batch(["a"], num_workers=0)


# ------------------------------------------------------------------------------ files
def test_save_from_files_round_trip(gpt2: BPETokenizer, tmp_path: Path) -> None:
    vocab_path, merges_path = gpt2.save(tmp_path)
    loaded = BPETokenizer.from_files(vocab_path, merges_path, [EOT])
    assert loaded.vocab == gpt2.vocab and loaded.merges == gpt2.merges
    text = "Héllo wörld<|endoftext|> 123"
    assert loaded.encode(text) == gpt2.encode(text)


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def small_files(tmp_path: Path) -> tuple[Path, Path]:
    tok = BPETokenizer(BYTES_VOCAB | {256: b"ab"}, [(b"a", b"b")])
    return tok.save(tmp_path)


def test_bad_json_names_file_and_line(tmp_path: Path) -> None:
    path = _write(tmp_path / "vocab.json", '{\n  "a": 0,\n  "b" 1\n}')
    with pytest.raises(ValueError, match=r"vocab\.json: line 3"):
        load_vocab_json(path)


def test_merge_line_without_two_parts_names_file_and_line(small_files, tmp_path: Path) -> None:
    vocab_path, _ = small_files
    merges = _write(tmp_path / "bad_merges.txt", "#version: 0.2\na b\nab\n")
    with pytest.raises(ValueError, match=r"bad_merges\.txt: line 3"):
        BPETokenizer.from_files(vocab_path, merges)


def test_merge_part_not_in_vocab_names_file_and_line(small_files, tmp_path: Path) -> None:
    vocab_path, _ = small_files
    merges = _write(tmp_path / "bad_merges.txt", "#version: 0.2\na b\nab c\n")
    with pytest.raises(ValueError, match=r"bad_merges\.txt: line 3.*'abc'"):
        BPETokenizer.from_files(vocab_path, merges)


def test_merge_of_unknown_token_names_file_and_line(small_files, tmp_path: Path) -> None:
    vocab_path, _ = small_files
    merges = _write(tmp_path / "bad_merges.txt", "#version: 0.2\nxy z\n")
    with pytest.raises(ValueError, match=r"bad_merges\.txt: line 2.*'xy'"):
        BPETokenizer.from_files(vocab_path, merges)


def test_missing_file_raises_file_not_found(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        load_merges_txt(tmp_path / "nope.txt")


def test_vocab_json_with_non_integer_id_is_rejected(tmp_path: Path) -> None:
    path = _write(tmp_path / "vocab.json", json.dumps({"a": "zero"}))
    with pytest.raises(ValueError, match="non-negative integer"):
        load_vocab_json(path)


def test_pickle_round_trip_drops_the_cache(gpt2: BPETokenizer) -> None:
    gpt2.encode("warm the cache")
    clone = pickle.loads(pickle.dumps(gpt2))
    assert len(clone._cache) == 0
    assert clone.encode("Hello <|endoftext|> world") == gpt2.encode("Hello <|endoftext|> world")
    fresh = BPETokenizer(gpt2.vocab, gpt2.merges, [EOT])
    assert pickle.dumps(clone) == pickle.dumps(fresh if gpt2._kernel_pattern is not None else reference_path(fresh))


# ------------------------------------------------------------------------------ long pre-tokens (heap path)
@pytest.fixture(scope="module")
def gpt2_heap(gpt2: BPETokenizer) -> BPETokenizer:
    """GPT-2 with every pre-token of 2+ bytes merged over the heap (the pure-Python path's option)."""
    return reference_path(BPETokenizer(gpt2.vocab, gpt2.merges, [EOT], heap_min_bytes=2))


def test_heap_path_on_the_minbpe_case() -> None:
    vocab = BYTES_VOCAB | {256: b"aa", 257: b"aaa", 258: b"aaab"}
    tok = reference_path(BPETokenizer(vocab, [(b"a", b"a"), (b"aa", b"a"), (b"aaa", b"b")], heap_min_bytes=2))
    assert tok.encode("aaabdaaabac") == [258, 100, 258, 97, 99]


def test_heap_path_merges_by_rank_not_by_length() -> None:
    vocab = BYTES_VOCAB | {256: b"bc", 257: b"ab", 258: b"abc"}
    tok = reference_path(BPETokenizer(vocab, [(b"b", b"c"), (b"a", b"b"), (b"ab", b"c")], heap_min_bytes=2))
    assert tok.encode("abc") == [97, 256]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=tricky_text)
def test_heap_path_equals_tiktoken_on_generated_text(gpt2_heap: BPETokenizer, reference, text: str) -> None:
    assert gpt2_heap.encode_ordinary(text) == reference.encode_ordinary(text)


@pytest.mark.parametrize("name", ["multilingual_samples.txt", "corpus.en", "tinystories_sample.txt"])
def test_heap_path_equals_tiktoken_on_corpus(gpt2_heap: BPETokenizer, reference, name: str) -> None:
    text = shared_file(name).read_text(encoding="utf-8")
    assert gpt2_heap.encode_ordinary(text) == reference.encode_ordinary(text)


def _long_runs() -> dict[str, str]:
    rng = random.Random(0)
    return {
        "dna": "".join(rng.choices("ACGT", k=20_000)),
        "one-letter": "a" * 5_000,
        "base64": "".join(rng.choices("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/", k=8_000)),
        "cjk": "".join(rng.choices("世界人权宣言联合国大会通过并颁布", k=3_000)),
        "digits": "".join(rng.choices("0123456789", k=6_000)),
        "punctuation": "".join(rng.choices("!?.,;:-_=+*", k=6_000)),
    }


@pytest.mark.parametrize("name", list(_long_runs()))
def test_long_runs_equal_tiktoken(gpt2: BPETokenizer, reference, name: str) -> None:
    text = _long_runs()[name]
    assert gpt2.encode(f"x {text} y") == reference.encode_ordinary(f"x {text} y")


@pytest.mark.parametrize("bad", [1, 0, "64", None])
def test_heap_min_bytes_must_be_an_int_of_at_least_two(bad) -> None:
    with pytest.raises(ValueError, match="heap_min_bytes"):
        BPETokenizer(BYTES_VOCAB, [], heap_min_bytes=bad)


# ------------------------------------------------------------------------------ encode_text (tiktoken's policy)
def test_encode_text_raises_on_special_text_by_default(gpt2: BPETokenizer, reference) -> None:
    with pytest.raises(ValueError, match="disallowed special token"):
        reference.encode(f"a{EOT}b")
    with pytest.raises(ValueError, match=r"(?s)disallowed special token '<\|endoftext\|>'.*allowed_special.*disallowed_special=\(\)"):
        gpt2.encode_text(f"a{EOT}b")


@pytest.mark.parametrize(
    "policy",
    [
        {"allowed_special": "all"},
        {"allowed_special": {EOT}},
        {"disallowed_special": ()},
        {"allowed_special": set(), "disallowed_special": set()},
        {"allowed_special": "all", "disallowed_special": "all"},
    ],
    ids=["allow-all", "allow-eot", "plain", "empty-sets", "allow-all-disallow-all"],
)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(parts=st.lists(tricky_text | st.just(EOT) | st.just(EOT[:7]), max_size=6))
def test_encode_text_equals_tiktoken_encode(gpt2: BPETokenizer, reference, policy: dict, parts: list[str]) -> None:
    text = "".join(parts)
    assert gpt2.encode_text(text, **policy) == reference.encode(text, **policy)


def test_encode_text_without_special_text_equals_encode(gpt2: BPETokenizer) -> None:
    text = shared_file("tinystories_sample.txt").read_text(encoding="utf-8").replace(EOT, "")
    assert gpt2.encode_text(text) == gpt2.encode(text)


def test_encode_text_allows_one_of_two_overlapping_tokens(gpt2_double: BPETokenizer) -> None:
    double = EOT + EOT
    tok = gpt2_double
    with pytest.raises(ValueError, match="disallowed special token"):
        tok.encode_text(f"a{double}", allowed_special={EOT})
    ids = tok.encode_text(f"a{double}", allowed_special={EOT}, disallowed_special=())
    assert ids == tok.encode_ordinary("a") + [tok.special_ids[EOT]] * 2


@pytest.mark.parametrize("bad", [EOT, [1], None])
def test_encode_text_rejects_bad_special_sets(gpt2: BPETokenizer, bad) -> None:
    with pytest.raises(TypeError, match="allowed_special"):
        gpt2.encode_text("a", allowed_special=bad)
