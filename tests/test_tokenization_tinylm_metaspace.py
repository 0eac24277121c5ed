"""HF wrappers of Unigram and SentencePiece BPE: slow and fast twins, AutoTokenizer, remote code."""

from __future__ import annotations

import json
import textwrap

import pytest
import sentencepiece as spm
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from transformers import AutoTokenizer

from sentencepiece_models import TRAIN, head_lines, sample_lines
from tiny_folders import run_fresh
from tinylm_hf.tokenization import (
    TinyLMSentencePieceBPETokenizer,
    TinyLMSentencePieceBPETokenizerFast,
    TinyLMUnigramTokenizer,
    TinyLMUnigramTokenizerFast,
)
from tinylm_hf.tokenization.sentencepiece_bpe.core import SentencePieceBPETokenizer
from tinylm_hf.tokenization.unigram.core import UnigramTokenizer
from tinylm_hf.tokenizer_training import train_sentencepiece_bpe, train_unigram

pytestmark = pytest.mark.contract  # run again on every dependency floor (.ci/run)

FAMILIES = {
    "unigram": (TinyLMUnigramTokenizer, TinyLMUnigramTokenizerFast, UnigramTokenizer, train_unigram),
    "sentencepiece-bpe": (TinyLMSentencePieceBPETokenizer, TinyLMSentencePieceBPETokenizerFast, SentencePieceBPETokenizer, train_sentencepiece_bpe),
}


@pytest.fixture(scope="module", params=list(FAMILIES))
def family(request, tmp_path_factory):
    """(slow class, fast class, a saved folder made from pieces our trainer learned, the .model path)."""
    slow_cls, fast_cls, core_cls, train = FAMILIES[request.param]
    folder = tmp_path_factory.mktemp(request.param)
    corpus = head_lines(TRAIN, 150_000, folder / "corpus.txt")
    model_path = core_cls(train(corpus, 500, progress=False)).save(folder / "trained.model")
    slow_cls.register_for_auto_class("AutoTokenizer")
    slow_cls(vocab_file=model_path).save_pretrained(folder / "hf")
    return slow_cls, fast_cls, folder / "hf", model_path


def test_slow_and_fast_give_identical_ids(family):
    slow_cls, fast_cls, folder, _ = family
    slow, fast = slow_cls.from_pretrained(folder), fast_cls.from_pretrained(folder)
    texts = sample_lines(200) + ["<s>Hi</s> there <unk>", "é漢字 😀"]
    for text in texts:
        assert slow(text)["input_ids"] == fast(text)["input_ids"], text
    ids = slow(texts[5])["input_ids"]
    assert slow.decode(ids) == fast.decode(ids) == texts[5]


def test_ids_equal_the_core_and_sentencepiece(family):
    slow_cls, _, folder, model_path = family
    slow = slow_cls.from_pretrained(folder)
    processor = spm.SentencePieceProcessor(model_file=str(folder / "tokenizer.model"))
    for text in sample_lines(100):
        assert slow(text)["input_ids"] == slow.core.encode(text) == processor.encode(text), text


def test_auto_tokenizer_loads_the_saved_folder(family):
    slow_cls, fast_cls, folder, _ = family
    config = json.loads((folder / "tokenizer_config.json").read_text())
    assert [entry.rpartition(".")[2] for entry in config["auto_map"]["AutoTokenizer"]] == [
        slow_cls.__name__, fast_cls.__name__]
    loaded = AutoTokenizer.from_pretrained(folder, trust_remote_code=True)
    assert type(loaded) is fast_cls
    assert loaded("Once upon a time")["input_ids"] == slow_cls.from_pretrained(folder)("Once upon a time")["input_ids"]


def test_fast_save_loads_with_the_slow_class(family, tmp_path):
    slow_cls, fast_cls, folder, _ = family
    fast = fast_cls.from_pretrained(folder)
    fast.save_pretrained(tmp_path)
    assert slow_cls.from_pretrained(tmp_path)("A cat sat.")["input_ids"] == fast("A cat sat.")["input_ids"]


def test_saved_folder_loads_without_tinylm(family, tmp_path):
    slow_cls, fast_cls, folder, _ = family
    expected = slow_cls.from_pretrained(folder)("Once upon a time, a cat.")["input_ids"]
    code = textwrap.dedent(f"""
        import importlib.util, json
        assert importlib.util.find_spec("tinylm_hf") is None
        from transformers import AutoTokenizer
        tok = AutoTokenizer.from_pretrained({str(folder)!r}, trust_remote_code=True)
        print(json.dumps([type(tok).__name__, tok("Once upon a time, a cat.")["input_ids"]]))
    """)
    name, ids = json.loads(run_fresh(code, tmp_path).stdout.strip().splitlines()[-1])
    assert name == fast_cls.__name__ and ids == expected


def test_fast_class_needs_a_model_file(tmp_path):
    with pytest.raises(ValueError, match="tokenizer.model"):
        TinyLMUnigramTokenizerFast(vocab_file=str(tmp_path / "missing.model"))


# ------------------------------------------------------------- byte pieces: decoded and read as sentencepiece does

# byte pieces (as bytes) -> sentencepiece's text: one U+FFFD per byte that starts no valid character
BYTE_CASES = {
    b"A\xe2A": "A\ufffdA",
    b"\xe2\x82": "\ufffd\ufffd",
    b"\xc3\xa9\xe2": "\u00e9\ufffd",  # a valid character and an invalid byte in one run of byte pieces
    b"\xed\xa0\x80": "\ufffd" * 3,  # a surrogate
    b"\xc0\x80": "\ufffd" * 2,  # an overlong form
    b"\xf0\x9f\x8c\x8d": "\U0001f30d",
}


@pytest.fixture(scope="module", params=list(FAMILIES))
def byte_fallback_folder(request, tmp_path_factory):
    """(slow, fast, tokenizers' Tokenizer of tokenizer.json, sentencepiece) on one folder with byte fallback."""
    from tokenizers import Tokenizer

    from tinylm_hf.tokenizer_training import train_tokenizer

    slow = train_tokenizer(iter([head_lines(TRAIN, 60_000, tmp_path_factory.mktemp("corpus") / "c.txt").read_text()]),
                           400, algorithm=request.param, byte_fallback=True, progress=False)
    folder = tmp_path_factory.mktemp(f"{request.param}-bytes")
    slow.save_pretrained(folder)
    return (slow, AutoTokenizer.from_pretrained(folder), Tokenizer.from_file(str(folder / "tokenizer.json")),
            spm.SentencePieceProcessor(model_file=str(folder / "tokenizer.model")))


def byte_ids(tokenizer, data: bytes) -> list[int]:
    return [tokenizer.convert_tokens_to_ids(f"<0x{byte:02X}>") for byte in data]


@pytest.mark.parametrize("data", list(BYTE_CASES), ids=lambda data: data.hex())
def test_byte_pieces_decode_as_sentencepiece_does(byte_fallback_folder, data):
    slow, fast, _, processor = byte_fallback_folder
    ids = byte_ids(slow, data)
    assert slow.decode(ids) == fast.decode(ids) == processor.decode(ids) == BYTE_CASES[data]


def test_tokenizer_json_alone_decodes_byte_pieces_as_llama_does(byte_fallback_folder):
    # what a reader of tokenizer.json alone gets (an export-llama folder): Llama's decoder, U+FFFD for each piece of
    # a run of byte pieces that holds an invalid byte; the TinyLM fast classes decode such text again
    slow, _, backend, _ = byte_fallback_folder
    assert backend.decode(byte_ids(slow, b"A\xe2A")) == "\ufffd" * 3
    assert backend.decode(byte_ids(slow, b"\xe2\x82")) == "\ufffd" * 2


def test_normal_pieces_end_a_run_of_byte_pieces(byte_fallback_folder):
    slow, fast, backend, processor = byte_fallback_folder
    ids = [slow.convert_tokens_to_ids("A"), *byte_ids(slow, b"\xe2"), slow.convert_tokens_to_ids("A")]
    assert slow.decode(ids) == fast.decode(ids) == backend.decode(ids) == processor.decode(ids) == "A\ufffdA"


@pytest.mark.parametrize("text", ["<0x41>", "x <0x41> y", "<0xE2><0x82>", "a<0x4"])
def test_text_that_spells_a_byte_piece_is_plain_text(byte_fallback_folder, text):
    slow, fast, backend, processor = byte_fallback_folder
    expected = processor.encode(text)
    for split in (False, True):
        assert slow(text, split_special_tokens=split)["input_ids"] == expected
        assert fast(text, split_special_tokens=split)["input_ids"] == expected
    assert backend.encode(text).ids == expected


def test_text_that_spells_a_special_token_is_plain_text_with_special_tokens_unsplit(byte_fallback_folder):
    """sentencepiece never matches a control or unknown piece in text; the Unigram twin cuts inside its spelling."""
    from tinylm_hf.tokenization.plain_text import special_token_texts

    slow, fast, backend, processor = byte_fallback_folder
    backend.encode_special_tokens = True
    for token in special_token_texts(slow):
        for text in [token, f"x {token}y", f"{token}{token}", f"<{token}"]:
            expected = processor.encode(text)
            assert slow(text, split_special_tokens=True)["input_ids"] == expected, text
            assert fast(text, split_special_tokens=True)["input_ids"] == expected, text
            assert backend.encode(text).ids == expected, text
        assert fast(f"x{token}")["input_ids"] == slow(f"x{token}")["input_ids"]  # split out first: the control id
        assert slow.convert_tokens_to_ids(token) in fast(f"x{token}")["input_ids"]


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(text=st.text(max_size=40))
@example(text="<s>")  # hypothesis found it in a full run: a special token's spelling
def test_slow_fast_and_sentencepiece_agree_on_any_text(byte_fallback_folder, text):
    # as plain text: sentencepiece never reads a special token's spelling ("<s>") as its control id, and
    # transformers does unless told not to (that case: the test above)
    slow, fast, _, processor = byte_fallback_folder
    ids = processor.encode(text)
    assert slow(text, split_special_tokens=True)["input_ids"] == fast(text, split_special_tokens=True)["input_ids"] == ids
    assert slow.decode(ids) == fast.decode(ids) == processor.decode(ids)


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.binary(max_size=12).filter(lambda data: not data.startswith(b" ")))
def test_slow_fast_and_sentencepiece_decode_any_bytes_alike(byte_fallback_folder, data):
    # a leading <0x20> piece is left out: sentencepiece keeps that space, the classes drop it as the dummy prefix
    # (no text encodes to it: a space is always the piece "▁")
    slow, fast, _, processor = byte_fallback_folder
    ids = byte_ids(slow, data)
    assert slow.decode(ids) == fast.decode(ids) == processor.decode(ids)
