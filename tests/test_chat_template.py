"""The chat format: one template, Phi-3's text, chat tokens added to any tokenizer family and kept by save/load."""

from __future__ import annotations

import jinja2
import pytest

from tiny_chats import CONVERSATION, FAMILIES, chat_copy, story_text, trained  # noqa: F401  (story_text: a fixture)
from tinylm_hf.tokenization.chat_template import (
    CHAT_TEMPLATE,
    CHAT_TOKENS,
    END_OF_TURN_TOKEN,
    add_chat_tokens,
    end_of_turn_id,
    has_chat_format,
    portable_chat_template,
    renders_chat_format,
    stop_token_ids,
)

pytestmark = pytest.mark.contract  # apply_chat_template, add_special_tokens, save_pretrained

RENDERED = ("<|system|>\nYou tell stories.<|end|>\n<|user|>\nTell me a story about Ben.<|end|>\n"
            "<|assistant|>\nOnce upon a time, Ben ran.\nHe was happy.<|end|>\n<|user|>\nMore?<|end|>\n")
CONVERSATION = CONVERSATION[:4]  # ends with the user's turn


@pytest.fixture(scope="module")
def bpe(story_text):
    """A byte-level BPE tokenizer trained without the chat tokens."""
    return trained(story_text, "bpe")


def test_template_renders_phi3_text(bpe):
    assert chat_copy(bpe).apply_chat_template(CONVERSATION, tokenize=False) == RENDERED


def test_generation_prompt_opens_the_assistant_turn(bpe):
    text = chat_copy(bpe).apply_chat_template(CONVERSATION, tokenize=False, add_generation_prompt=True)
    assert text == RENDERED + "<|assistant|>\n"


def test_unknown_role_is_refused(bpe):
    with pytest.raises(Exception, match="unknown role tool: use system, user or assistant"):
        chat_copy(bpe).apply_chat_template([{"role": "tool", "content": "x"}], tokenize=False)


def test_portable_template_renders_the_same_text_in_plain_jinja():
    template = jinja2.Environment().from_string(portable_chat_template())
    assert "{% generation %}" not in portable_chat_template() and "{% generation %}" in CHAT_TEMPLATE
    assert template.render(messages=CONVERSATION, add_generation_prompt=False) == RENDERED


def test_missing_chat_tokens_are_appended_as_special_tokens(bpe):
    tokenizer = chat_copy(bpe)
    assert [tokenizer.convert_tokens_to_ids(t) for t in CHAT_TOKENS] == list(range(len(bpe), len(bpe) + 4))
    assert has_chat_format(tokenizer) and not has_chat_format(bpe)
    assert tokenizer("a<|end|>b", add_special_tokens=False, split_special_tokens=True)["input_ids"] != \
        tokenizer("a<|end|>b", add_special_tokens=False)["input_ids"]  # user text cannot forge the token


def test_trained_chat_tokens_keep_their_ids(story_text):
    tokenizer = trained(story_text, "bpe", chat_tokens=True)
    ids = [tokenizer.convert_tokens_to_ids(t) for t in CHAT_TOKENS]
    assert add_chat_tokens(tokenizer) == 0
    assert [tokenizer.convert_tokens_to_ids(t) for t in CHAT_TOKENS] == ids and max(ids) < len(tokenizer)


@pytest.mark.parametrize("algorithm", FAMILIES)
def test_chat_format_survives_save_and_load(story_text, tmp_path, algorithm):
    from tinylm_hf.tokenizer_loading import load_tokenizer

    tokenizer = trained(story_text, algorithm)
    add_chat_tokens(tokenizer)
    tokenizer.save_pretrained(tmp_path)
    loaded = load_tokenizer(tmp_path)
    assert has_chat_format(loaded) and (tmp_path / "chat_template.jinja").is_file()
    assert loaded.apply_chat_template(CONVERSATION)["input_ids"] == tokenizer.apply_chat_template(CONVERSATION)["input_ids"]


def test_generation_stops_at_the_end_of_turn_then_eos(bpe):
    tokenizer = chat_copy(bpe)
    end = tokenizer.convert_tokens_to_ids(END_OF_TURN_TOKEN)
    assert end_of_turn_id(tokenizer) == end and end_of_turn_id(bpe) is None
    assert stop_token_ids(tokenizer) == [end, tokenizer.eos_token_id]
    assert stop_token_ids(bpe) == [bpe.eos_token_id]


@pytest.mark.parametrize("change, renders", [
    (lambda t: t + "\n", True),  # an editor's final newline
    (lambda t: portable_chat_template(t), True),  # without the {% generation %} markers
    (lambda t: t.replace("message['content']", "message['content'] | trim"), False),
    (lambda t: t.replace("'\\n'", "' '"), False),
    (lambda t: "{{ broken(", False),
], ids=["final-newline", "portable", "trims", "other-text", "broken"])
def test_a_template_is_the_chat_format_by_what_it_renders(bpe, change, renders):
    tokenizer = chat_copy(bpe)
    tokenizer.chat_template = change(CHAT_TEMPLATE)
    assert renders_chat_format(tokenizer.chat_template) is renders
    assert has_chat_format(tokenizer) is renders
    assert (end_of_turn_id(tokenizer) is not None) is renders
