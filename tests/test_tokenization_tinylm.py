"""TinyLMTokenizer: equal to BPETokenizer, and a complete Hugging Face tokenizer (auto class, remote code)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch
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
from tokenizers import AddedToken, Tokenizer
from transformers import AutoTokenizer

from tinylm_hf import BPETokenizer, TinyLMTokenizer, TinyLMTokenizerFast
from tinylm_hf.cli import main as cli_main
from tinylm_hf.tokenization.bpe.byte_unicode import token_to_unicode
from conftest import env_without_tinylm

pytestmark = pytest.mark.contract  # run again on every dependency floor (.ci/run)

CHAT_TEMPLATE = "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}<|endoftext|>{% endfor %}"


@pytest.fixture(scope="module")
def source_dir(tmp_path_factory):
    return write_source_files(tmp_path_factory.mktemp("source"))


@pytest.fixture(scope="module")
def tok(source_dir) -> TinyLMTokenizer:
    return TinyLMTokenizer(str(source_dir / "vocab.json"), str(source_dir / "merges.txt"))


@pytest.fixture(scope="module")
def bpe(source_dir) -> BPETokenizer:
    return BPETokenizer.from_files(source_dir / "vocab.json", source_dir / "merges.txt", [ENDOFTEXT])


@pytest.fixture(scope="module")
def small_dir(shared_data, tmp_path_factory):
    return write_small_gpt2_files(tmp_path_factory.mktemp("small"))


def fresh(directory) -> TinyLMTokenizer:
    return TinyLMTokenizer(str(directory / "vocab.json"), str(directory / "merges.txt"))


# ------------------------------------------------------------------------------ equality with BPE
@pytest.mark.parametrize(("name", "chars"), CORPUS_SLICES, ids=[n for n, _ in CORPUS_SLICES])
def test_input_ids_equal_bpe_encode_on_corpus(tok, bpe, name, chars):
    text = read_slice(name, chars)
    assert tok(text)["input_ids"] == bpe.encode(text)


def test_input_ids_equal_bpe_encode_on_bundled_corpus(tok, bpe):
    text = read_bundled(100_000)
    assert tok(text)["input_ids"] == bpe.encode(text)


@pytest.mark.slow
@pytest.mark.parametrize(("name", "chars"), CORPUS_FULL, ids=[n for n, _ in CORPUS_FULL])
def test_input_ids_equal_bpe_encode_on_full_corpus(tok, bpe, name, chars):
    text = read_slice(name, chars)
    assert tok(text)["input_ids"] == bpe.encode(text)


@pytest.mark.parametrize(("name", "chars"), CORPUS_SLICES[:3], ids=[n for n, _ in CORPUS_SLICES[:3]])
def test_small_vocab_equals_bpe_encode(small_dir, name, chars):
    text = read_slice(name, chars)
    reference = BPETokenizer.from_files(small_dir / "vocab.json", small_dir / "merges.txt", [ENDOFTEXT])
    assert fresh(small_dir)(text)["input_ids"] == reference.encode(text)


@pytest.mark.parametrize("text", WHITESPACE_CASES)
def test_edge_cases_equal_bpe_encode(tok, bpe, text):
    assert tok(text)["input_ids"] == bpe.encode(text)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.one_of(st.text(max_size=30), st.sampled_from([ENDOFTEXT, " ", "\n", "  \n"])), max_size=6))
def test_random_text_equals_bpe_encode_and_round_trips(tok, bpe, parts):
    text = "".join(parts)
    ids = tok(text)["input_ids"]
    assert ids == bpe.encode(text)
    assert tok.decode(ids) == text


def test_no_special_tokens_added_by_default(tok):
    assert tok("hello world", add_special_tokens=True)["input_ids"] == tok.encode("hello world", add_special_tokens=False)
    assert tok.eos_token_id not in tok("hello world")["input_ids"]


# --------------------------------------------------------------------------------- special tokens
def test_endoftext_is_eos_bos_unk_and_pad(tok, bpe):
    eot = bpe.special_ids[ENDOFTEXT]
    assert (tok.eos_token, tok.eos_token_id) == (ENDOFTEXT, eot)
    assert tok.bos_token_id == tok.unk_token_id == tok.pad_token_id == eot
    assert len(tok) == tok.vocab_size == len(bpe.vocab)


def test_special_token_text_maps_to_its_id(tok, bpe):
    ids = tok("a<|endoftext|><|endoftext|>b")["input_ids"]
    eot = bpe.special_ids[ENDOFTEXT]
    assert ids == bpe.encode("a") + [eot, eot] + bpe.encode("b")


def test_split_special_tokens_encodes_special_text_as_plain_text(tok, bpe):
    text = "user says <|endoftext|> here"
    ids = tok(text, split_special_tokens=True)["input_ids"]
    assert ids == bpe.encode_ordinary(text)
    assert tok.eos_token_id not in ids


def test_split_special_tokens_set_at_init_is_the_default(source_dir, bpe):
    safe = TinyLMTokenizer(str(source_dir / "vocab.json"), str(source_dir / "merges.txt"), split_special_tokens=True)
    assert safe("x<|endoftext|>")["input_ids"] == bpe.encode_ordinary("x<|endoftext|>")


def test_added_token_with_lstrip_strips_the_space_before_it(source_dir, bpe):
    tok = fresh(source_dir)
    tok.add_tokens([AddedToken("<|x|>", lstrip=True, special=True)])
    assert tok("a   <|x|>b")["input_ids"] == bpe.encode("a") + [tok.convert_tokens_to_ids("<|x|>")] + bpe.encode("b")


def test_plain_added_token_still_matches_under_split_special_tokens(source_dir, bpe):
    tok = fresh(source_dir)
    tok.add_tokens(["tinylmword"])
    ids = tok("a tinylmword<|endoftext|>", split_special_tokens=True)["input_ids"]
    assert ids == bpe.encode("a ") + [tok.convert_tokens_to_ids("tinylmword")] + bpe.encode_ordinary("<|endoftext|>")


# ----------------------------------------------------------------------------------------- decode
def test_decode_lone_continuation_byte_gives_replacement_char(tok, bpe):
    lone = bpe.token_to_id[b"\x80"]
    assert tok.decode([lone]) == "\ufffd"


def test_decode_skip_special_tokens(tok):
    ids = tok("a<|endoftext|>b")["input_ids"]
    assert tok.decode(ids) == "a<|endoftext|>b"
    assert tok.decode(ids, skip_special_tokens=True) == "ab"


def test_tokenize_returns_byte_level_strings(tok, bpe):
    text = " hello world\n\u00e9"
    assert tok.tokenize(text) == [token_to_unicode(bpe.vocab[i]) for i in bpe.encode(text)]
    assert tok.convert_tokens_to_ids(tok.tokenize(text)) == bpe.encode(text)


# ------------------------------------------------------------------------- batches and tensors
def test_batch_padding_truncation_and_tensors(tok, bpe):
    texts = ["Once upon a time", "a", "The quick brown fox jumps over the lazy dog again and again"]
    batch = tok(texts, padding=True, truncation=True, max_length=8, return_tensors="pt")
    lengths = [min(len(bpe.encode(t)), 8) for t in texts]
    assert batch["input_ids"].shape == (3, max(lengths))
    assert batch["input_ids"].dtype == torch.long
    assert batch["attention_mask"].sum(dim=1).tolist() == lengths
    for row, text, n in zip(batch["input_ids"].tolist(), texts, lengths):
        assert row[:n] == bpe.encode(text)[:n]
        assert row[n:] == [tok.pad_token_id] * (len(row) - n)


def test_left_padding(tok, bpe):
    batch = tok(["a b c", "a"], padding=True, padding_side="left", return_tensors="pt")
    assert batch["input_ids"][1].tolist() == [tok.pad_token_id] * 2 + bpe.encode("a")
    assert batch["attention_mask"][1].tolist() == [0, 0, 1]


def test_pad_to_max_length_and_multiple(tok):
    batch = tok(["hello"], padding="max_length", max_length=5)
    assert len(batch["input_ids"][0]) == 5
    texts = ["hello", "hello there you"]
    batch = tok(texts, padding=True, pad_to_multiple_of=4)
    longest = max(len(tok(t)["input_ids"]) for t in texts)
    assert {len(r) for r in batch["input_ids"]} == {-(-longest // 4) * 4}


# ------------------------------------------------------------------------------- save and load
@pytest.fixture
def customised(source_dir) -> TinyLMTokenizer:
    tok = fresh(source_dir)
    tok.add_tokens(["<|user|>", "<|assistant|>"], special_tokens=True)
    tok.add_tokens(["tinylmword"])
    tok.chat_template = CHAT_TEMPLATE
    return tok


def test_save_and_load_round_trip(customised, tmp_path):
    customised.save_pretrained(tmp_path)
    loaded = TinyLMTokenizer.from_pretrained(tmp_path)
    text = "<|user|>hi tinylmword<|assistant|>hello<|endoftext|>"
    assert loaded(text)["input_ids"] == customised(text)["input_ids"]
    assert loaded.get_vocab() == customised.get_vocab()
    assert loaded.added_tokens_decoder == customised.added_tokens_decoder
    assert loaded.all_special_tokens == customised.all_special_tokens
    assert (loaded.pad_token, loaded.eos_token, loaded.pattern) == (ENDOFTEXT, ENDOFTEXT, "gpt2")
    assert loaded.chat_template == CHAT_TEMPLATE
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    assert loaded.apply_chat_template(messages, tokenize=False) == customised.apply_chat_template(
        messages, tokenize=False
    )
    assert loaded.decode(loaded(text)["input_ids"]) == text


def test_saved_folder_holds_gpt2_format_files(customised, tmp_path, source_dir):
    customised.save_pretrained(tmp_path)
    assert json.loads((tmp_path / "vocab.json").read_text("utf-8")) == json.loads(
        (source_dir / "vocab.json").read_text("utf-8")
    )
    assert BPETokenizer.from_files(tmp_path / "vocab.json", tmp_path / "merges.txt").merges == customised.bpe.merges


def test_saved_tokenizer_json_matches(customised, tmp_path):
    customised.save_pretrained(tmp_path)
    fast = Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    text = read_bundled(5000) + "<|user|>tinylmword<|assistant|> x"
    assert fast.encode(text).ids == customised(text)["input_ids"]


def test_auto_tokenizer_returns_tinylm_tokenizer(customised, tmp_path):
    customised.save_pretrained(tmp_path)
    loaded = AutoTokenizer.from_pretrained(tmp_path)
    assert type(loaded) is TinyLMTokenizerFast
    assert json.loads((tmp_path / "tokenizer_config.json").read_text())["auto_map"]["AutoTokenizer"] == [
        "tokenization_tinylm.TinyLMTokenizer", "tokenization_tinylm_fast.TinyLMTokenizerFast"]


def test_remote_code_loads_without_tinylm_hf(customised, tmp_path):
    folder = tmp_path / "tok"
    customised.save_pretrained(folder)
    text = "<|user|>hi tinylmword<|endoftext|> there"
    script = textwrap.dedent(
        f"""
        import importlib.util, json
        from transformers import AutoTokenizer
        assert importlib.util.find_spec("tinylm_hf") is None, "tinylm_hf must not be importable here"
        tok = AutoTokenizer.from_pretrained({str(folder)!r}, trust_remote_code=True)
        print(json.dumps([type(tok).__name__, tok({text!r})["input_ids"], tok.chat_template]))
        """
    )
    env = env_without_tinylm(tmp_path, HF_HOME=str(tmp_path / "hf_home"))
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    name, ids, template = json.loads(result.stdout.strip().splitlines()[-1])
    assert (name, ids, template) == ("TinyLMTokenizerFast", customised(text)["input_ids"], CHAT_TEMPLATE)


def test_gpt4_pattern_round_trips_without_tokenizer_json(source_dir, tmp_path):
    tok = TinyLMTokenizer(str(source_dir / "vocab.json"), str(source_dir / "merges.txt"), pattern="gpt4")
    reference = BPETokenizer.from_files(
        source_dir / "vocab.json", source_dir / "merges.txt", [ENDOFTEXT], pattern="gpt4"
    )
    text = "It's 12345 things\n\n  ok<|endoftext|>!!"
    assert tok(text)["input_ids"] == reference.encode(text)
    tok.save_pretrained(tmp_path)
    assert not (tmp_path / "tokenizer.json").exists()
    assert TinyLMTokenizer.from_pretrained(tmp_path)(text)["input_ids"] == reference.encode(text)


def test_missing_vocab_file_raises(tmp_path):
    with pytest.raises(FileNotFoundError):
        TinyLMTokenizer(str(tmp_path / "nope.json"), str(tmp_path / "nope.txt"))


# ------------------------------------------------------------------------------------------- CLI
def test_cli_train_tokenizer_writes_loadable_folder(bundled_train_path, tmp_path):
    from tinylm_hf.tokenization.bpe.train import train_bpe

    corpus = tmp_path / "corpus.txt"
    corpus.write_text(bundled_train_path.read_text(encoding="utf-8")[:50_000], encoding="utf-8")
    out = tmp_path / "tok"
    argv = ["train-tokenizer", "--input", str(corpus), "--vocab-size", "400", "--out", str(out)]
    argv += ["--special-token", ENDOFTEXT, "--special-token", "<|pad|>", "--num-workers", "1", "--no-progress"]
    assert cli_main(argv) == 0
    loaded = AutoTokenizer.from_pretrained(out)
    vocab, merges = train_bpe(corpus, 400, [ENDOFTEXT, "<|pad|>"], num_workers=1, progress=False)
    reference = BPETokenizer(vocab, merges, [ENDOFTEXT, "<|pad|>"])
    text = corpus.read_text(encoding="utf-8")[:5000] + "<|pad|>"
    assert type(loaded) is TinyLMTokenizerFast
    assert len(loaded) == 400
    assert loaded(text)["input_ids"] == reference.encode(text)
    assert (loaded.eos_token, loaded.pad_token) == (ENDOFTEXT, "<|pad|>")
    assert TinyLMTokenizerFast.from_pretrained(out)(text)["input_ids"] == reference.encode(text)
