"""TinyLMTokenizerFast: the `tokenizers` twin gives TinyLMTokenizer's ids on the same folder."""

from __future__ import annotations

import json

import pytest
from hf_tokenizer_data import (
    CORPUS_FULL,
    CORPUS_SLICES,
    ENDOFTEXT,
    WHITESPACE_CASES,
    read_bundled,
    read_slice,
    write_small_gpt2_files,
    write_source_files,
)
from hypothesis import given, settings
from hypothesis import strategies as st
from transformers import AutoTokenizer, PreTrainedTokenizerFast

from tinylm_hf import TinyLMTokenizer, TinyLMTokenizerFast

pytestmark = pytest.mark.contract  # run again on every dependency floor (.ci/run)

EXTRA = ["<|user|>", "<|assistant|>", "<|endoftext|><|endoftext|>"]


def save_folder(source, target) -> tuple[TinyLMTokenizer, TinyLMTokenizerFast]:
    """A saved TinyLMTokenizer folder with extra special and plain added tokens, and both loaders on it."""
    slow = TinyLMTokenizer(str(source / "vocab.json"), str(source / "merges.txt"))
    slow.add_tokens(EXTRA, special_tokens=True)
    slow.add_tokens(["tinylmword"])
    slow.save_pretrained(target)
    return TinyLMTokenizer.from_pretrained(target), TinyLMTokenizerFast.from_pretrained(target)


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    source = write_source_files(tmp_path_factory.mktemp("source"))
    return save_folder(source, tmp_path_factory.mktemp("saved"))


@pytest.fixture(scope="module")
def small_pair(shared_data, tmp_path_factory):
    source = write_small_gpt2_files(tmp_path_factory.mktemp("small"))
    return save_folder(source, tmp_path_factory.mktemp("small_saved"))


def assert_same_ids(pair, text: str, **kwargs) -> None:
    slow, fast = pair
    assert fast(text, **kwargs)["input_ids"] == slow(text, **kwargs)["input_ids"]


@pytest.mark.parametrize(("name", "chars"), CORPUS_SLICES, ids=[n for n, _ in CORPUS_SLICES])
def test_fast_equals_slow_on_corpus(pair, name, chars):
    assert_same_ids(pair, read_slice(name, chars))


def test_fast_equals_slow_on_bundled_corpus(pair):
    assert_same_ids(pair, read_bundled(100_000))


@pytest.mark.parametrize(("name", "chars"), CORPUS_SLICES[:4], ids=[n for n, _ in CORPUS_SLICES[:4]])
def test_fast_equals_slow_on_corpus_small_vocab(small_pair, name, chars):
    assert_same_ids(small_pair, read_slice(name, chars))


@pytest.mark.slow
@pytest.mark.parametrize(("name", "chars"), CORPUS_FULL, ids=[n for n, _ in CORPUS_FULL])
def test_fast_equals_slow_on_full_corpus(pair, name, chars):
    assert_same_ids(pair, read_slice(name, chars))


@pytest.mark.parametrize("text", WHITESPACE_CASES)
def test_fast_equals_slow_on_edge_cases(pair, text):
    assert_same_ids(pair, text)
    assert_same_ids(pair, text, split_special_tokens=True)


def test_added_tokens_match_longest_first(pair):
    slow, fast = pair
    text = "a<|endoftext|><|endoftext|><|endoftext|>b<|user|>tinylmword<|assistant|>"
    ids = slow(text)["input_ids"]
    assert fast(text)["input_ids"] == ids
    assert slow.convert_tokens_to_ids("<|endoftext|><|endoftext|>") in ids


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.text(max_size=20),
            st.text(alphabet=" \t\n\r\u00a0\u3000x", max_size=8),
            st.sampled_from([ENDOFTEXT, *EXTRA, "tinylmword", "<|", "|>"]),
        ),
        max_size=8,
    )
)
def test_fast_equals_slow_on_random_text(pair, parts):
    text = "".join(parts)
    slow, fast = pair
    ids = slow(text)["input_ids"]
    assert fast(text)["input_ids"] == ids
    assert fast(text, split_special_tokens=True)["input_ids"] == slow(text, split_special_tokens=True)["input_ids"]
    assert fast.decode(ids) == slow.decode(ids) == text


def test_fast_special_tokens_and_padding(pair):
    slow, fast = pair
    assert (fast.eos_token_id, fast.pad_token_id, fast.bos_token_id) == (
        slow.eos_token_id,
        slow.pad_token_id,
        slow.bos_token_id,
    )
    texts = ["short", "a somewhat longer text <|endoftext|> here"]
    a = fast(texts, padding=True, truncation=True, max_length=6, return_tensors="pt")
    b = slow(texts, padding=True, truncation=True, max_length=6, return_tensors="pt")
    assert a["input_ids"].tolist() == b["input_ids"].tolist()
    assert a["attention_mask"].tolist() == b["attention_mask"].tolist()


def test_fast_decode_equals_slow_with_invalid_utf8(pair):
    slow, fast = pair
    ids = [slow.bpe.token_to_id[b"\xe2"], slow.bpe.token_to_id[b"a"], slow.eos_token_id]
    assert fast.decode(ids) == slow.decode(ids) == "\ufffda" + ENDOFTEXT
    assert fast.decode(ids, skip_special_tokens=True) == slow.decode(ids, skip_special_tokens=True)


def test_fast_save_and_reload(pair, tmp_path):
    slow, fast = pair
    fast.save_pretrained(tmp_path)
    again = TinyLMTokenizerFast.from_pretrained(tmp_path)
    text = "hi<|user|>tinylmword<|endoftext|>"
    assert again(text)["input_ids"] == slow(text)["input_ids"]


def test_fast_saved_folder_loads_as_slow(pair, tmp_path):
    slow, fast = pair
    fast.save_pretrained(tmp_path)
    reloaded = TinyLMTokenizer.from_pretrained(tmp_path)
    text = "hi<|user|>tinylmword<|endoftext|> " + read_bundled(5000)
    assert type(AutoTokenizer.from_pretrained(tmp_path)) is TinyLMTokenizerFast
    assert reloaded.get_vocab() == slow.get_vocab()
    assert reloaded.bpe.merges == slow.bpe.merges
    assert reloaded(text)["input_ids"] == slow(text)["input_ids"]


def test_fast_reports_the_tokenizers_backend_on_every_saved_folder(pair, tmp_path):
    # processors and pipelines read `backend` to choose the fast code paths
    slow, fast = pair
    assert slow.backend == "custom" and fast.backend == "tokenizers"  # `fast` was loaded from the slow folder
    fast.save_pretrained(tmp_path)
    assert TinyLMTokenizerFast.from_pretrained(tmp_path).backend == "tokenizers"
    assert TinyLMTokenizer.from_pretrained(tmp_path).backend == "custom"


def test_auto_tokenizer_returns_the_fast_twin_of_a_folder_the_slow_class_saved(pair, tmp_path):
    slow, _ = pair
    slow.save_pretrained(tmp_path)
    assert (tmp_path / "tokenizer.json").is_file()
    assert type(AutoTokenizer.from_pretrained(tmp_path)) is TinyLMTokenizerFast


def test_a_folder_the_twin_cannot_run_loads_with_the_slow_class(tmp_path):
    # tokenizers' ByteLevel pre-tokenizer hard-codes GPT-2's regex: a gpt4-pattern folder has no tokenizer.json
    source = write_source_files(tmp_path / "source")
    TinyLMTokenizer(str(source / "vocab.json"), str(source / "merges.txt"), pattern="gpt4").save_pretrained(
        tmp_path / "saved")
    tmp_path = tmp_path / "saved"
    config = json.loads((tmp_path / "tokenizer_config.json").read_text())
    assert config["auto_map"]["AutoTokenizer"] == ["tokenization_tinylm.TinyLMTokenizer", None]
    loaded = AutoTokenizer.from_pretrained(tmp_path)
    assert type(loaded) is TinyLMTokenizer and loaded.pattern == "gpt4"


def test_generic_fast_tokenizer_reads_saved_tokenizer_json(pair, tmp_path):
    slow, _ = pair
    slow.save_pretrained(tmp_path)
    generic = PreTrainedTokenizerFast(tokenizer_file=str(tmp_path / "tokenizer.json"))
    text = "a<|endoftext|>b<|user|> " + read_bundled(3000)
    assert generic(text)["input_ids"] == slow(text)["input_ids"]


def test_fast_rejects_non_gpt2_pattern(tmp_path):
    source = write_source_files(tmp_path)
    with pytest.raises(ValueError, match="gpt2"):
        TinyLMTokenizerFast(vocab_file=str(source / "vocab.json"), merges_file=str(source / "merges.txt"), pattern="gpt4")


def test_fast_decode_of_an_out_of_range_id_raises_as_the_slow_one(tmp_path):
    from tinylm_hf.tokenizer_training import build_hf_tokenizer

    build_hf_tokenizer({i: bytes([i]) for i in range(256)}, [], ["<|endoftext|>"]).save_pretrained(tmp_path)
    for cls in (TinyLMTokenizer, TinyLMTokenizerFast):
        with pytest.raises(ValueError, match="token id 5000 is not in the vocabulary"):
            cls.from_pretrained(tmp_path).decode([65, 5000])


def test_tokenizer_json_that_disagrees_with_vocab_json_is_an_error(tmp_path):
    import json as json_module

    from tinylm_hf.tokenizer_training import build_hf_tokenizer

    build_hf_tokenizer({i: bytes([i]) for i in range(256)} | {256: b"ab"}, [(b"a", b"b")],
                       ["<|endoftext|>"]).save_pretrained(tmp_path)
    spec = json_module.loads((tmp_path / "tokenizer.json").read_text(encoding="utf-8"))
    spec["model"]["merges"] = []
    spec["model"]["vocab"].pop("ab")
    (tmp_path / "tokenizer.json").write_text(json_module.dumps(spec), encoding="utf-8")
    with pytest.raises(ValueError, match="tokenizer.json disagrees with .*vocab.json"):
        TinyLMTokenizerFast.from_pretrained(tmp_path)


def test_missing_or_undecodable_merges_txt_is_named(tmp_path):
    from tinylm_hf.tokenizer_training import build_hf_tokenizer

    build_hf_tokenizer({i: bytes([i]) for i in range(256)}, [], ["<|endoftext|>"]).save_pretrained(tmp_path)
    (tmp_path / "merges.txt").write_bytes(b"#version: 0.2\n\xff\xfe a\n")
    with pytest.raises(ValueError, match="merges.txt: not valid UTF-8"):
        TinyLMTokenizer.from_pretrained(tmp_path)
    (tmp_path / "merges.txt").unlink()
    with pytest.raises(ValueError, match="merges.txt is missing beside .*vocab.json"):
        TinyLMTokenizer.from_pretrained(tmp_path)


@pytest.mark.parametrize("text", ["Once upon a time", " leading space", "a<|user|>b", "x <|endoftext|> y", "\nHi", ""])
def test_add_prefix_space_fast_equals_slow_and_survives_saving(tmp_path, text):
    source = write_source_files(tmp_path / "source")
    slow = TinyLMTokenizer(str(source / "vocab.json"), str(source / "merges.txt"), add_prefix_space=True)
    slow.add_tokens(EXTRA, special_tokens=True)
    slow.save_pretrained(tmp_path / "saved")
    pair = TinyLMTokenizer.from_pretrained(tmp_path / "saved"), TinyLMTokenizerFast.from_pretrained(tmp_path / "saved")
    assert all(t.add_prefix_space for t in pair)
    assert_same_ids(pair, text)
    words = ["Once", "upon", " a"]
    fast_ids, slow_ids = (t(words, is_split_into_words=True)["input_ids"] for t in reversed(pair))
    assert fast_ids == slow_ids
    if text and not text.startswith((" ", "<")):
        assert pair[0](text)["input_ids"] == slow(" " + text)["input_ids"]  # the space GPT-2's models expect
