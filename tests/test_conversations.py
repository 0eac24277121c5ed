"""Conversation files: the messages format read and checked line by line, and the bundled TinyStories set."""

from __future__ import annotations

import json

import pytest

from tinylm_hf.corpus.conversations import STORY_CHATS, load_conversations, load_story_chats


def write_lines(path, *rows) -> str:
    path.write_text("".join((row if isinstance(row, str) else json.dumps(row)) + "\n" for row in rows))
    return str(path)


def test_messages_are_read_in_order(tmp_path):
    first = {"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello."}]}
    second = {"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "A story?"},
                           {"role": "assistant", "content": "Once."}], "source": "ignored"}
    assert load_conversations(write_lines(tmp_path / "c.jsonl", first, "", second)) == \
        [first["messages"], second["messages"]]


@pytest.mark.parametrize("row,problem", [
    pytest.param("{not json", "line 2 is not valid JSON", id="not-json"),
    pytest.param({"text": "x"}, 'line 2: expected an object with a non-empty "messages" list', id="no-messages"),
    pytest.param({"messages": [{"role": "robot", "content": "x"}]}, 'each message needs a "role"', id="bad-role"),
    pytest.param({"messages": [{"role": "user", "content": 3}]}, 'a string "content"', id="bad-content"),
    pytest.param({"messages": [{"role": "user", "content": "x"}]}, "line 2: the conversation has no assistant message",
                 id="no-assistant"),
    pytest.param('{"messages": [{"role": "user", "content": "a \\ud800"}, {"role": "assistant", "content": "b"}]}',
                 r"line 2 holds the lone surrogate escape \\ud800", id="lone-surrogate"),
])
def test_a_malformed_line_is_named(tmp_path, row, problem):
    good = {"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello."}]}
    with pytest.raises(ValueError, match=problem):
        load_conversations(write_lines(tmp_path / "c.jsonl", good, row))


def test_a_missing_or_empty_file_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_conversations(tmp_path / "absent.jsonl")
    with pytest.raises(ValueError, match="holds no conversations"):
        load_conversations(write_lines(tmp_path / "empty.jsonl", ""))


@pytest.mark.parametrize("split", sorted(STORY_CHATS))
def test_bundled_stories_are_told_by_the_assistant(split):
    conversations = load_story_chats(split)
    assert len(conversations) > 150
    for messages in conversations:
        assert [m["role"] for m in messages if m["role"] != "system"] == ["user", "assistant"]
        assert len(messages[-1]["content"]) > 100


def test_bundled_set_loads_with_datasets():
    datasets = pytest.importorskip("datasets")
    rows = datasets.load_dataset("json", data_files=str(STORY_CHATS["validation"]), split="train")
    assert rows.column_names == ["messages"] and rows[0]["messages"] == load_story_chats("validation")[0]


def test_unknown_split_is_refused():
    with pytest.raises(ValueError, match="unknown split 'test'"):
        load_story_chats("test")


def test_a_leading_byte_order_mark_is_dropped_as_by_every_reader(tmp_path):
    line = json.dumps({"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]})
    (tmp_path / "c.jsonl").write_bytes("\ufeff".encode() + line.encode() + b"\n")
    assert load_conversations(tmp_path / "c.jsonl")[0][1]["content"] == "hello"


def test_a_latin1_file_is_refused_naming_the_file_and_line(tmp_path):
    line = json.dumps({"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "caf\xe9"}]},
                      ensure_ascii=False)
    (tmp_path / "c.jsonl").write_bytes(b"\n" + line.encode("latin-1") + b"\n")
    with pytest.raises(ValueError, match=r"c.jsonl is not UTF-8 text: byte 0xE9 at offset \d+ \(line 2\)"):
        load_conversations(tmp_path / "c.jsonl")
