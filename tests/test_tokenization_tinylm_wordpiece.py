"""TinyLMWordPieceTokenizer (+ fast twin): equal to WordPieceTokenizer and BertTokenizer, a complete HF tokenizer."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
from conftest import PACKAGE_DATA, env_without_tinylm
from hf_tokenizer_data import CORPUS_SLICES, read_slice
from transformers import AutoTokenizer, BertTokenizer
from transformers.models.auto import tokenization_auto

from tinylm_hf.registration import register
from tinylm_hf.tokenization.wordpiece.tokenization_tinylm_wordpiece import TinyLMWordPieceTokenizer
from tinylm_hf.tokenization.wordpiece.tokenization_tinylm_wordpiece_fast import TinyLMWordPieceTokenizerFast
from tinylm_hf.tokenization.wordpiece.core import WordPieceTokenizer, write_vocab_txt
from tinylm_hf.tokenization.wordpiece.train import train_wordpiece

pytestmark = pytest.mark.contract  # run again on every dependency floor (.ci/run)

PAIR = ("Hello [CLS] there, Über-café! [MASK]x 中文", "Second  segment, with ünïcode.")


@pytest.fixture(scope="module")
def vocab() -> list[str]:
    text = (PACKAGE_DATA / "tinystories_train_small.txt").read_text(encoding="utf-8")[:150_000]
    return train_wordpiece([text, "Über café ünïcode 中文"], 1500, progress=False)


@pytest.fixture(scope="module", params=[False, True], ids=["cased", "uncased"])
def trio(request, vocab, tmp_path_factory):
    """(slow, fast, BertTokenizer) on the same vocab.txt."""
    path = str(write_vocab_txt(vocab, tmp_path_factory.mktemp("v") / "vocab.txt"))
    lower = request.param
    return (
        TinyLMWordPieceTokenizer(path, do_lower_case=lower),
        TinyLMWordPieceTokenizerFast(vocab_file=path, do_lower_case=lower),
        BertTokenizer(vocab=path, do_lower_case=lower),
    )


@pytest.fixture
def registered():
    """The package's registration (tinylm_hf.registration): the class by name for AutoTokenizer, auto_map on save."""
    register()
    assert tokenization_auto.REGISTERED_TOKENIZER_CLASSES["TinyLMWordPieceTokenizer"] is TinyLMWordPieceTokenizer


@pytest.mark.parametrize(("name", "chars"), CORPUS_SLICES, ids=[n for n, _ in CORPUS_SLICES])
def test_input_ids_equal_wordpiece_fast_and_bert_on_corpus(trio, vocab, name, chars):
    slow, fast, bert = trio
    text = read_slice(name, chars)
    ids = slow(text, add_special_tokens=False)["input_ids"]
    assert ids == WordPieceTokenizer(vocab, lowercase=slow.do_lower_case).encode(text)
    assert ids == fast(text, add_special_tokens=False)["input_ids"]
    assert ids == bert(text, add_special_tokens=False)["input_ids"]


def test_pair_template_and_token_type_ids_equal_bert(trio):
    slow, fast, bert = trio
    expected = bert(*PAIR)
    for tok in (slow, fast):
        got = tok(*PAIR, return_token_type_ids=True)
        assert got["input_ids"] == expected["input_ids"]
        assert got["token_type_ids"] == expected["token_type_ids"]
        assert got["attention_mask"] == expected["attention_mask"]
    ids = expected["input_ids"]
    assert ids[0] == slow.cls_token_id and ids.count(slow.sep_token_id) == 2 and ids[-1] == slow.sep_token_id
    assert set(expected["token_type_ids"]) == {0, 1}


def test_returns_only_what_tinylm_models_take(trio):
    slow, fast, _ = trio
    for tok in (slow, fast):
        assert list(tok(*PAIR)) == ["input_ids", "attention_mask"]


def test_generate_takes_the_tokenizer_output_of_a_causal_model(trio):
    # token_type_ids in the encoding made TinyLMForCausalLM.generate raise
    import torch
    from tiny_models import make_model

    slow, fast, _ = trio
    model = make_model(vocab_size=len(slow), pad_token_id=slow.pad_token_id, eos_token_id=slow.sep_token_id)
    for tok in (slow, fast):
        encoding = tok("Once upon a time", return_tensors="pt")
        with torch.no_grad():
            out = model.generate(**encoding, max_new_tokens=3, do_sample=False)
        assert out.shape == (1, encoding["input_ids"].shape[1] + 3)


def test_decode_equals_bert(trio):
    slow, fast, bert = trio
    ids = bert(*PAIR)["input_ids"]
    for skip in (False, True):
        assert slow.decode(ids, skip_special_tokens=skip) == bert.decode(ids, skip_special_tokens=skip)
        assert fast.decode(ids, skip_special_tokens=skip) == bert.decode(ids, skip_special_tokens=skip)


def test_batch_padding_equals_fast(trio):
    slow, fast, _ = trio
    batch = ["a short one", "and a rather longer sentence here"]
    assert slow(batch, padding=True)["input_ids"] == fast(batch, padding=True)["input_ids"]
    assert slow(batch, padding=True)["input_ids"][0][-1] == slow.pad_token_id


def test_save_and_reload_both_ways(trio, tmp_path):
    slow, fast, _ = trio
    slow.save_pretrained(tmp_path / "slow")
    fast.save_pretrained(tmp_path / "fast")
    expected = slow(*PAIR)["input_ids"]
    for folder in ("slow", "fast"):
        assert TinyLMWordPieceTokenizer.from_pretrained(tmp_path / folder)(*PAIR)["input_ids"] == expected
        assert TinyLMWordPieceTokenizerFast.from_pretrained(tmp_path / folder)(*PAIR)["input_ids"] == expected
    assert (tmp_path / "slow" / "vocab.txt").read_text(encoding="utf-8").splitlines() == list(slow.wordpiece.token_to_id)


def test_auto_tokenizer_returns_the_installed_class(trio, registered, tmp_path):
    slow, _, _ = trio
    slow.save_pretrained(tmp_path)
    config = json.loads((tmp_path / "tokenizer_config.json").read_text())
    assert config["auto_map"]["AutoTokenizer"] == ["tokenization_tinylm_wordpiece.TinyLMWordPieceTokenizer",
                                                   "tokenization_tinylm_wordpiece_fast.TinyLMWordPieceTokenizerFast"]
    loaded = AutoTokenizer.from_pretrained(tmp_path)
    assert type(loaded) is TinyLMWordPieceTokenizerFast
    assert loaded.do_lower_case == slow.do_lower_case
    assert loaded(*PAIR)["input_ids"] == slow(*PAIR)["input_ids"]


def test_remote_code_loads_without_tinylm_hf(trio, registered, tmp_path):
    slow, _, _ = trio
    folder = tmp_path / "tok"
    slow.save_pretrained(folder)
    script = textwrap.dedent(
        f"""
        import importlib.util, json
        from transformers import AutoTokenizer
        assert importlib.util.find_spec("tinylm_hf") is None, "tinylm_hf must not be importable here"
        tok = AutoTokenizer.from_pretrained({str(folder)!r}, trust_remote_code=True)
        enc = tok(*{PAIR!r}, return_token_type_ids=True)
        print(json.dumps([type(tok).__name__, enc["input_ids"], enc["token_type_ids"]]))
        """
    )
    env = env_without_tinylm(tmp_path, HF_HOME=str(tmp_path / "hf_home"))
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    name, ids, types = json.loads(result.stdout.strip().splitlines()[-1])
    expected = slow(*PAIR, return_token_type_ids=True)
    assert (name, ids, types) == ("TinyLMWordPieceTokenizerFast", expected["input_ids"], expected["token_type_ids"])


def test_corrupt_vocab_file_raises(tmp_path):
    path = tmp_path / "vocab.txt"
    path.write_text("[UNK]\n[UNK]\n", encoding="utf-8")
    with pytest.raises(ValueError, match="repeats line 1"):
        TinyLMWordPieceTokenizer(str(path))
    with pytest.raises(ValueError, match="repeats line 1"):
        TinyLMWordPieceTokenizerFast(vocab_file=str(path))


def test_vocab_without_unknown_token_raises(tmp_path):
    path = tmp_path / "vocab.txt"
    path.write_text("a\n##b\n", encoding="utf-8")
    with pytest.raises(ValueError, match="unk_token"):
        TinyLMWordPieceTokenizer(str(path))
