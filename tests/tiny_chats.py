"""Tiny chat tokenizers (any family, trained on the bundled stories) and a hand-checkable conversation."""

from __future__ import annotations

import copy

import pytest

from conftest import PACKAGE_DATA
from tinylm_hf.tokenization.chat_template import CHAT_TOKENS, add_chat_tokens

FAMILIES = ("bpe", "wordpiece", "unigram", "sentencepiece-bpe")
CONVERSATION = [
    {"role": "system", "content": "You tell stories."},
    {"role": "user", "content": "Tell me a story about Ben."},
    {"role": "assistant", "content": "Once upon a time, Ben ran.\nHe was happy."},
    {"role": "user", "content": "More?"},
    {"role": "assistant", "content": "The end."},
]
ASSISTANT_TEXT = "Once upon a time, Ben ran.\nHe was happy.<|end|>The end.<|end|>"  # what the model learns to say


@pytest.fixture(scope="module")
def story_text() -> str:
    return (PACKAGE_DATA / "tinystories_train_small.txt").read_text(encoding="utf-8")[:40_000]


def trained(text: str, algorithm: str, chat_tokens: bool = False):
    """A 400-token tokenizer of `algorithm` trained on `text` (with the chat tokens among its specials if asked)."""
    from tinylm_hf.tokenizer_training import train_tokenizer
    from tinylm_hf.tokenization.families import FAMILIES

    specials = [*FAMILIES[algorithm].special_tokens, *(CHAT_TOKENS if chat_tokens else ())]
    return train_tokenizer(iter([text]), 400, specials, algorithm=algorithm, progress=False)


def chat_copy(tokenizer):
    """A copy of `tokenizer` with the chat tokens and template added."""
    tokenizer = copy.deepcopy(tokenizer)
    add_chat_tokens(tokenizer)
    return tokenizer


def write_short_chats(path, count: int = 24, split: str = "train"):
    """`count` bundled story conversations cut to their reply's first sentence (short enough for tiny contexts)."""
    import json

    from tinylm_hf.corpus.conversations import load_story_chats

    lines = []
    for messages in load_story_chats(split)[:count]:
        reply = messages[-1]["content"].split(". ")[0] + "."
        lines.append(json.dumps({"messages": [*messages[:-1], {"role": "assistant", "content": reply}]}) + "\n")
    path.write_text("".join(lines), encoding="utf-8")
    return path


def make_chat_folder(folder, **overrides):
    """A tiny TinyLM folder (tiny_folders.make_tiny_folder) whose tokenizer has the chat tokens and template."""
    from tiny_folders import make_tiny_folder
    from transformers import AutoTokenizer

    probe = AutoTokenizer.from_pretrained(make_tiny_folder(folder.parent / f"{folder.name}-probe"))
    make_tiny_folder(folder, vocab_size=len(probe) + len(CHAT_TOKENS), **overrides)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    add_chat_tokens(tokenizer)
    tokenizer.save_pretrained(folder)
    return folder
