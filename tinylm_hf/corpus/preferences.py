"""Preference pairs for DPO: JSON lines in TRL's preference format, read and checked line by line, and tokenized
as TRL's `DPOTrainer` tokenizes them.

A row is conversational, `{"prompt": [messages], "chosen": [assistant message], "rejected": [assistant message]}`,
rendered by the tokenizer's chat template (`tokenization.plain_text.encode_chat`: markers are control tokens,
every content plain text), or plain text, `{"prompt": str, "chosen": str, "rejected": str}`, encoded as plain
text (`encode_plain`) with the end-of-text id after each completion (TRL appends the end-of-text token).
The completion is every token after the tokenized prompt, as TRL counts it: the prompt is what the prompt alone
encodes to (with the assistant's generation prompt), cut to where it and each prompt+completion first differ,
so a completion holds the template's closing tokens (`<|end|>` and the newline after it). Sequences longer than
`max_length` keep their start (TRL's `truncation_mode="keep_start"`), and a pair whose prompt alone fills
`max_length` is left out, as TRL drops it. The same files load with `datasets.load_dataset("json", ...)`.

The bundled set (`STORY_PREFERENCES`) is made from the bundled story chats by `scripts/build_story_preferences.py`
(chosen: the story about the character the user named; rejected: a story about another one); it is
CDLA-Sharing-1.0 like its source (data/NOTICE.md).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..tokenization.plain_text import encode_chat, encode_plain
from .conversations import ROLES, read_json_lines
from .sources import PACKAGE_DATA, parse_json_text

PreferenceRow = dict[str, Any]  # {"prompt": str | messages, "chosen": str | messages, "rejected": str | messages}
FIELDS = ("prompt", "chosen", "rejected")
STORY_PREFERENCES = {
    "train": PACKAGE_DATA / "tinystories_preferences_train.jsonl",
    "validation": PACKAGE_DATA / "tinystories_preferences_valid.jsonl",
}


@dataclass
class PreferencePair:
    """One tokenized pair: the prompt's ids and each completion's ids after it."""

    prompt: list[int]
    chosen: list[int]
    rejected: list[int]


def load_preferences(path: str | os.PathLike) -> list[PreferenceRow]:
    """Every pair of a JSON-lines file (blank lines skipped); a malformed line is a ValueError naming it."""
    return read_json_lines(path, parse_preference, "preference file",
                           'preference pairs (one {"prompt", "chosen", "rejected"} object per line)')


def parse_preference(line: str, where: str) -> PreferenceRow:
    """One line's pair, checked: three strings, or a prompt of messages and chosen/rejected assistant messages."""
    row = parse_json_text(line, where)
    if not isinstance(row, dict) or any(name not in row for name in FIELDS):
        raise ValueError(f'{where}: expected an object with "prompt", "chosen" and "rejected" '
                         "(strings, or lists of messages)")
    values = [row[name] for name in FIELDS]
    if all(isinstance(v, str) for v in values):
        return {name: row[name] for name in FIELDS}
    if not all(isinstance(v, list) and v for v in values):
        raise ValueError(f'{where}: "prompt", "chosen" and "rejected" must all be strings or all be non-empty '
                         "lists of messages")
    for name in FIELDS:
        for message in row[name]:
            if not isinstance(message, dict) or message.get("role") not in ROLES \
                    or not isinstance(message.get("content"), str):
                raise ValueError(f'{where}: each message of "{name}" needs a "role" ({", ".join(ROLES)}) and a '
                                 f"string \"content\", got {message!r}")
    for name in ("chosen", "rejected"):
        if any(m["role"] != "assistant" for m in row[name]):
            raise ValueError(f'{where}: "{name}" must hold the assistant\'s reply only (role "assistant")')
    return {name: [{"role": m["role"], "content": m["content"]} for m in row[name]] for name in FIELDS}


def tokenize_preference(tokenizer: Any, row: PreferenceRow, max_length: int | None = None) -> PreferencePair | None:
    """The pair's prompt and completion ids, as TRL's DPOTrainer makes them; None when the prompt fills `max_length`."""
    if isinstance(row["prompt"], str):
        eos = [tokenizer.eos_token_id]
        prompt = encode_plain(tokenizer, row["prompt"])
        chosen = encode_plain(tokenizer, row["prompt"] + row["chosen"]) + eos
        rejected = encode_plain(tokenizer, row["prompt"] + row["rejected"]) + eos
    else:
        prompt = encode_chat(tokenizer, row["prompt"], add_generation_prompt=True).ids
        chosen = encode_chat(tokenizer, row["prompt"] + row["chosen"]).ids
        rejected = encode_chat(tokenizer, row["prompt"] + row["rejected"]).ids
    cut = min(common_prefix_length(prompt, chosen), common_prefix_length(prompt, rejected))
    if max_length is not None and cut >= max_length:
        return None
    end = max_length if max_length is not None else None
    return PreferencePair(prompt[:cut], chosen[cut:end], rejected[cut:end])


def common_prefix_length(ids: Sequence[int], other: Sequence[int]) -> int:
    """How many leading ids `ids` and `other` share."""
    n = 0
    for a, b in zip(ids, other):
        if a != b:
            break
        n += 1
    return n
