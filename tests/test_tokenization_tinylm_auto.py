"""What AutoTokenizer returns on a TinyLM folder: the fast twin, with all of transformers' tokenizer API, giving
the slow class's ids on the same calls (every family, chat folders included)."""

from __future__ import annotations

import json
import textwrap

import pytest
from tiny_chats import ASSISTANT_TEXT, CONVERSATION, FAMILIES, story_text, trained  # noqa: F401 (fixture)
from tiny_folders import run_fresh
from transformers import AutoTokenizer

from tinylm_hf.tokenization.chat_template import add_chat_tokens
from tinylm_hf.tokenizer_loading import load_tokenizer
from tinylm_hf.tokenization.families import FAMILIES as FAMILY_TABLE

TEXTS = ["Ben ran home.", "Once upon a time, a cat sat.\n\nThe end.", "  two  spaces ", "é漢字 Жω!", "<|end|> not a turn"]


@pytest.fixture(scope="module", params=FAMILIES)
def chat_folder(request, story_text, tmp_path_factory):  # noqa: F811 (fixture)
    """(family name, folder) of a chat tokenizer of that family, saved by its slow class."""
    tokenizer = trained(story_text, request.param)
    add_chat_tokens(tokenizer)
    folder = tmp_path_factory.mktemp(request.param)
    tokenizer.save_pretrained(folder)
    return request.param, folder


@pytest.fixture(scope="module")
def both(chat_folder):
    """(slow, fast) loaded from the chat folder: the slow class by name, the fast one by AutoTokenizer."""
    name, folder = chat_folder
    return FAMILY_TABLE[name].slow.from_pretrained(folder), AutoTokenizer.from_pretrained(folder)


def test_auto_tokenizer_returns_the_fast_twin_and_auto_map_names_both(chat_folder, both):
    name, folder = chat_folder
    family = FAMILY_TABLE[name]
    assert type(both[1]) is family.fast and type(both[0]) is family.slow
    auto_map = json.loads((folder / "tokenizer_config.json").read_text())["auto_map"]["AutoTokenizer"]
    assert [entry.rpartition(".")[2] for entry in auto_map] == [family.slow_name, family.fast_name]
    assert all((folder / f"{entry.partition('.')[0]}.py").is_file() for entry in auto_map)


def test_the_slow_class_names_its_fast_twin_as_the_family_table_does():
    for family in FAMILY_TABLE.values():
        assert family.slow.fast_twin.rpartition(".")[2] == family.fast_name
        assert family.fast.slow_tokenizer_class is family.slow


def test_both_classes_give_the_same_ids_on_the_same_calls(both):
    slow, fast = both
    for split in (False, True):
        for text in TEXTS:
            assert fast(text, split_special_tokens=split)["input_ids"] == slow(text, split_special_tokens=split)["input_ids"]
    batch = dict(padding=True, return_attention_mask=True)
    assert fast(TEXTS, **batch).data == slow(TEXTS, **batch).data
    chat = dict(tokenize=True, return_dict=True)
    assert fast.apply_chat_template(CONVERSATION, **chat)["input_ids"] == slow.apply_chat_template(CONVERSATION, **chat)["input_ids"]
    ids = fast.apply_chat_template(CONVERSATION, **chat)["input_ids"]
    assert fast.decode(ids) == slow.decode(ids)
    assert fast.decode(ids, skip_special_tokens=True) == slow.decode(ids, skip_special_tokens=True)


@pytest.mark.parametrize("call", [
    dict(text=["Ben", "ran", "home."], is_split_into_words=True),
    dict(text="Ben ran.", text_pair="He was happy."),
    dict(text="Once upon a time there was a cat named Tom.", truncation=True, max_length=5),
    dict(text="Ben ran.", return_special_tokens_mask=True),
    dict(text=["a", "Ben ran home"], padding=True, padding_side="left"),
], ids=["pre-split words", "a pair", "truncation", "special tokens mask", "left padding"])
def test_both_classes_agree_on_the_rest_of_the_call(both, call):
    slow, fast = both
    assert fast(**call).data == slow(**call).data


def test_overflowing_windows_come_from_the_fast_class(both):
    fast = both[1]
    text = "Once upon a time there was a cat named Tom."
    windows = fast(text, truncation=True, max_length=5, stride=2, return_overflowing_tokens=True, add_special_tokens=False)
    whole = fast(text, add_special_tokens=False)["input_ids"]
    assert windows["input_ids"][0] == whole[:5] and windows["input_ids"][1][:2] == whole[3:5]  # 2 tokens overlap


def test_offsets_word_ids_and_char_to_token_come_from_the_fast_class(both):
    slow, fast = both
    text = "Ben ran home."
    enc = fast(text, return_offsets_mapping=True, add_special_tokens=False)
    assert enc["input_ids"] == slow(text, add_special_tokens=False)["input_ids"]
    spans = [text[start:end].strip() for start, end in enc["offset_mapping"]]
    assert "".join(spans) == "Benranhome."  # every character of every word, once, in order
    words = [[i for i, word in enumerate(enc.word_ids()) if word == w] for w in range(3)]  # Ben / ran / home
    found = [text[enc["offset_mapping"][ws[0]][0]:enc["offset_mapping"][ws[-1]][1]].strip() for ws in words]
    assert found[:2] == ["Ben", "ran"] and found[2] in ("home", "home.")  # sentencepiece-style words keep the "."
    assert enc.word_ids()[enc.char_to_token(text.index("home"))] == 2


def test_the_slow_class_says_where_offsets_come_from(both):
    # transformers' Python tokenizers drop return_offsets_mapping without a word, and fail on the assistant mask
    # with "'NoneType' object is not subscriptable"
    slow, fast = both
    with pytest.raises(ValueError, match=f"use its fast twin {type(fast).__name__}"):
        slow("Ben ran home.", return_offsets_mapping=True)
    with pytest.raises(ValueError, match="return_assistant_tokens_mask=True needs character offsets"):
        slow.apply_chat_template(CONVERSATION, tokenize=True, return_dict=True, return_assistant_tokens_mask=True)


def test_the_assistant_mask_covers_each_reply_and_its_end_of_turn_token(chat_folder, both):
    name, _ = chat_folder
    slow, fast = both
    out = fast.apply_chat_template(CONVERSATION, tokenize=True, return_dict=True, return_assistant_tokens_mask=True)
    rendered = fast.apply_chat_template(CONVERSATION, tokenize=False)
    assert rendered == slow.apply_chat_template(CONVERSATION, tokenize=False)
    enc = fast(rendered, add_special_tokens=False, return_offsets_mapping=True)
    assert enc["input_ids"] == out["input_ids"]
    covered = "".join(rendered[start:end] for (start, end), m in zip(enc["offset_mapping"], out["assistant_masks"]) if m)
    # WordPiece offsets leave out the whitespace between words; the other families' cover every character
    assert covered == (ASSISTANT_TEXT if name != "wordpiece" else "".join(ASSISTANT_TEXT.split()))


def test_trl_finds_the_end_of_turn_token_inside_the_assistant_mask(both):
    # what SFTTrainer(assistant_only_loss=True) checks before warning that the model may never learn to stop
    from trl.chat_template_utils import is_chat_template_stop_token_trained

    assert is_chat_template_stop_token_trained(both[1])


@pytest.mark.parametrize("name", ["bpe", "unigram"])
def test_chat_tokens_in_the_trained_vocabulary_are_masked_alike(name, story_text, tmp_path):  # noqa: F811
    tokenizer = trained(story_text, name, chat_tokens=True)  # `train-tokenizer --chat`: the markers keep their ids
    add_chat_tokens(tokenizer)
    tokenizer.save_pretrained(tmp_path)
    fast = AutoTokenizer.from_pretrained(tmp_path)
    out = fast.apply_chat_template(CONVERSATION, tokenize=True, return_dict=True, return_assistant_tokens_mask=True)
    masked = [i for i, m in zip(out["input_ids"], out["assistant_masks"]) if m]
    assert fast.decode(masked) == ASSISTANT_TEXT


def test_the_package_loader_keeps_running_the_hand_written_core(chat_folder):
    name, folder = chat_folder
    assert type(load_tokenizer(folder)) is FAMILY_TABLE[name].slow


def test_remote_code_gives_the_assistant_mask_without_tinylm_hf(story_text, tmp_path):  # noqa: F811
    tokenizer = trained(story_text, "bpe")  # one family is enough for a fresh process: the classes share the mechanism
    add_chat_tokens(tokenizer)
    folder = tmp_path / "chat"
    tokenizer.save_pretrained(folder)
    out = run_fresh(textwrap.dedent(f"""
        import json
        from transformers import AutoTokenizer
        tok = AutoTokenizer.from_pretrained({str(folder)!r}, trust_remote_code=True)
        out = tok.apply_chat_template({CONVERSATION!r}, tokenize=True, return_dict=True, return_assistant_tokens_mask=True)
        print(json.dumps([type(tok).__name__, out["input_ids"], out["assistant_masks"]]))
    """), tmp_path)
    class_name, ids, mask = json.loads(out.stdout.strip().splitlines()[-1])
    expected = AutoTokenizer.from_pretrained(folder).apply_chat_template(
        CONVERSATION, tokenize=True, return_dict=True, return_assistant_tokens_mask=True)
    assert (class_name, ids, mask) == ("TinyLMTokenizerFast", expected["input_ids"], expected["assistant_masks"])


@pytest.mark.parametrize("name", FAMILIES)
def test_chat_tokens_the_fast_class_adds_and_saves_load_with_the_package_loader(name, story_text, tmp_path):  # noqa: F811
    # the fast class writes the added tokens into tokenizer.json; a sentencepiece-style slow twin's tokenizer.json
    # is its core's: the folder must still count as one tokenizer
    trained(story_text, name).save_pretrained(tmp_path / "plain")
    fast = AutoTokenizer.from_pretrained(tmp_path / "plain")
    add_chat_tokens(fast)
    fast.save_pretrained(tmp_path / "chat")
    slow = load_tokenizer(tmp_path / "chat")
    chat = dict(tokenize=True, return_dict=True)
    assert slow.apply_chat_template(CONVERSATION, **chat)["input_ids"] == fast.apply_chat_template(CONVERSATION, **chat)["input_ids"]
