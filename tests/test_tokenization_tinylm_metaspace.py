"""HF wrappers of Unigram and SentencePiece BPE: slow and fast twins, AutoTokenizer, remote code."""

from __future__ import annotations

import json
import textwrap

import pytest
import sentencepiece as spm
from transformers import AutoTokenizer

from sentencepiece_models import TRAIN, head_lines, sample_lines
from tiny_folders import run_fresh
from tinylm_hf.tokenization import (
    TinyLMSentencePieceBPETokenizer,
    TinyLMSentencePieceBPETokenizerFast,
    TinyLMUnigramTokenizer,
    TinyLMUnigramTokenizerFast,
    train_sentencepiece_bpe,
    train_unigram,
)
from tinylm_hf.tokenization.sentencepiece_bpe import SentencePieceBPETokenizer
from tinylm_hf.tokenization.unigram import UnigramTokenizer

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
