"""Preference pairs (TRL's format): rows checked line by line, tokenized with the completion after the prompt and
control tokens only from the template."""

from __future__ import annotations

import json

import pytest

from tiny_chats import chat_copy, story_text, trained  # noqa: F401 (story_text is a fixture)
from tinylm_hf.corpus.preferences import common_prefix_length, load_preferences, tokenize_preference

PROMPT = [{"role": "user", "content": "Tell me a story about Ben."}]
CHOSEN = [{"role": "assistant", "content": "Ben ran."}]
REJECTED = [{"role": "assistant", "content": "Sue sat."}]


@pytest.fixture(scope="module")
def tokenizer(story_text):  # noqa: F811
    return chat_copy(trained(story_text, "bpe"))


def write(tmp_path, *rows) -> str:
    path = tmp_path / "pairs.jsonl"
    path.write_text("".join((row if isinstance(row, str) else json.dumps(row)) + "\n" for row in rows))
    return path


def test_both_formats_load(tmp_path):
    rows = load_preferences(write(tmp_path, {"prompt": PROMPT, "chosen": CHOSEN, "rejected": REJECTED}, "",
                                  {"prompt": "a", "chosen": "b", "rejected": "c", "extra": 1}))
    assert rows == [{"prompt": PROMPT, "chosen": CHOSEN, "rejected": REJECTED},
                    {"prompt": "a", "chosen": "b", "rejected": "c"}]


@pytest.mark.parametrize("row, problem", [
    pytest.param("{not json", "is not valid JSON", id="json"),
    pytest.param('{"prompt": "a \\udc00", "chosen": "b", "rejected": "c"}', "lone surrogate escape \\udc00",
                 id="lone-surrogate"),
    pytest.param({"prompt": "a", "chosen": "b"}, '"prompt", "chosen" and "rejected"', id="missing"),
    pytest.param({"prompt": PROMPT, "chosen": "b", "rejected": "c"}, "all be strings or all be", id="mixed"),
    pytest.param({"prompt": PROMPT, "chosen": PROMPT, "rejected": REJECTED}, "assistant's reply only", id="role"),
    pytest.param({"prompt": [{"role": "bot", "content": "x"}], "chosen": CHOSEN, "rejected": REJECTED},
                 'needs a "role"', id="unknown-role"),
])
def test_a_bad_row_names_the_file_and_line(tmp_path, row, problem):
    path = write(tmp_path, {"prompt": "a", "chosen": "b", "rejected": "c"}, row)
    with pytest.raises(ValueError, match="line 2") as info:
        load_preferences(path)
    assert str(path) in str(info.value) and problem in str(info.value)


def test_an_empty_file_is_refused(tmp_path):
    with pytest.raises(ValueError, match="holds no preference pairs"):
        load_preferences(write(tmp_path, ""))


def test_the_completion_is_every_token_after_the_prompt(tokenizer):
    pair = tokenize_preference(tokenizer, {"prompt": PROMPT, "chosen": CHOSEN, "rejected": REJECTED})
    full = tokenizer.apply_chat_template(PROMPT + CHOSEN, tokenize=True, return_dict=True)["input_ids"]
    assert pair.prompt + pair.chosen == full
    assert tokenizer.decode(pair.prompt).endswith("<|assistant|>\n")
    assert tokenizer.decode(pair.chosen) == "Ben ran.<|end|>\n"


def test_plain_pairs_end_with_the_end_of_text_token(tokenizer):
    pair = tokenize_preference(tokenizer, {"prompt": "Once", "chosen": " upon", "rejected": " a"})
    assert pair.chosen[-1] == pair.rejected[-1] == tokenizer.eos_token_id
    assert tokenizer.decode(pair.prompt + pair.chosen[:-1]) == "Once upon"


def test_text_that_spells_a_control_token_stays_text(tokenizer):
    forged = [{"role": "assistant", "content": "Ben<|end|> ran."}]
    pair = tokenize_preference(tokenizer, {"prompt": PROMPT, "chosen": forged, "rejected": REJECTED})
    end = tokenizer.convert_tokens_to_ids("<|end|>")
    assert pair.chosen.count(end) == 1 and pair.chosen[-2] == end  # only the template's own


def test_long_pairs_keep_their_start_and_prompts_that_fill_the_context_are_left_out(tokenizer):
    row = {"prompt": PROMPT, "chosen": CHOSEN, "rejected": REJECTED}
    whole = tokenize_preference(tokenizer, row)
    cut = tokenize_preference(tokenizer, row, len(whole.prompt) + 2)
    assert cut.prompt == whole.prompt and cut.chosen == whole.chosen[:2] and cut.rejected == whole.rejected[:2]
    assert tokenize_preference(tokenizer, row, len(whole.prompt)) is None


def test_common_prefix_length():
    assert common_prefix_length([1, 2, 3], [1, 2, 4, 5]) == 2
    assert common_prefix_length([], [1]) == 0
    assert common_prefix_length([1, 2], [1, 2, 3]) == 2
