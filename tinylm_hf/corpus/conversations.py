"""Conversations for supervised fine-tuning: JSON lines in the `{"messages": [{"role", "content"}, ...]}` format
of `datasets` and TRL, read and checked line by line, and the small set bundled with the package.

The bundled set (`STORY_CHATS`) is made from the bundled TinyStories slices by
`scripts/build_story_chats.py` (the user asks for a story about a character the story names, or for what
happens after its first paragraph; the assistant tells the story); it is CDLA-Sharing-1.0 like its source
(data/NOTICE.md). The same files load with `datasets.load_dataset("json", data_files=...)`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from .sources import PACKAGE_DATA, iter_lines, parse_json_text

ROLES = ("system", "user", "assistant")
STORY_CHATS = {
    "train": PACKAGE_DATA / "tinystories_chats_train.jsonl",
    "validation": PACKAGE_DATA / "tinystories_chats_valid.jsonl",
}

T = TypeVar("T")
Conversation = list[dict[str, str]]  # [{"role": "user", "content": "..."}, ...]


def load_conversations(path: str | os.PathLike) -> list[Conversation]:
    """Every conversation of a JSON-lines file (blank lines skipped); a malformed line is a ValueError naming it.

    Each line is an object with a "messages" list of {"role": system|user|assistant, "content": str} objects
    holding at least one assistant message (the turns a model is fine-tuned to say).
    """
    return read_json_lines(path, _parse_line, "conversation file",
                           'conversations (one JSON object with a "messages" list per line)')


def read_json_lines(path: str | os.PathLike, parse: Callable[[str, str], T], kind: str, holds: str) -> list[T]:
    """`parse(line, where)` of every non-blank line of a JSON-lines file, where = "PATH, line N"; an empty file is
    a ValueError saying it holds no `holds`."""
    path = Path(path)
    rows = []
    for number, line in iter_lines(path, kind):
        if line.strip():
            rows.append(parse(line, f"{path}, line {number}"))
    if not rows:
        raise ValueError(f"{path} holds no {holds}")
    return rows


def _parse_line(line: str, where: str) -> Conversation:
    row = parse_json_text(line, where)
    messages = row.get("messages") if isinstance(row, dict) else None
    if not isinstance(messages, list) or not messages:
        raise ValueError(f'{where}: expected an object with a non-empty "messages" list')
    for message in messages:
        if not isinstance(message, dict) or message.get("role") not in ROLES or not isinstance(message.get("content"), str):
            raise ValueError(f'{where}: each message needs a "role" ({", ".join(ROLES)}) and a string "content", '
                             f"got {message!r}")
    if not any(message["role"] == "assistant" for message in messages):
        raise ValueError(f"{where}: the conversation has no assistant message to learn from")
    return [{"role": m["role"], "content": m["content"]} for m in messages]


def load_story_chats(split: str = "train") -> list[Conversation]:
    """The bundled TinyStories conversations: split "train" or "validation"."""
    if split not in STORY_CHATS:
        raise ValueError(f"unknown split {split!r}; choose one of {', '.join(STORY_CHATS)}")
    return load_conversations(STORY_CHATS[split])
