"""Rebuild the bundled conversation set (tinylm_hf/data/tinystories_chats_*.jsonl) from the bundled TinyStories text.

Each conversation is one story of the bundled slices, told by the assistant, in the `{"messages": [...]}`
format of `datasets` / TRL. The user's request is made from what the story itself says, so every reply
really is an answer to its request:
- "story about": the story introduces a character as "<a little boy> named <Ben>"; the user asks for a
  story about that character (one of a few phrasings) and the assistant tells the whole story;
- "what next": the user gives the story's first paragraph and asks what happens next; the assistant
  tells the rest of the story.
One conversation in four starts with a fixed system message. Stories keep their words; spaces around lines
and blank lines are dropped. Only stories of at most MAX_CHARS characters are used (they fit a 256-token context with a 2k-token vocabulary). The output is the same
bytes on every run (a seeded random stream makes the choices):

    python scripts/build_story_chats.py            # rewrites the two files in tinylm_hf/data
    python scripts/build_story_chats.py --out DIR  # writes them into DIR instead
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tinylm_hf.corpus import split_documents  # noqa: E402
from tinylm_hf.corpus.conversations import STORY_CHATS  # noqa: E402
from tinylm_hf.corpus.sources import PACKAGE_DATA  # noqa: E402

SOURCES = {"train": "tinystories_train_small.txt", "validation": "tinystories_valid_small.txt"}
MAX_CHARS = 700
SEED = 25
SYSTEM_MESSAGE = "You are a storyteller. You tell short, simple stories for young children."
NAMED = re.compile(r"\b((?:a|an) (?:[a-z]+ ){0,3}?[a-z]+) named ([A-Z][a-z]+)\b")
# (request, needs the descriptor): "{who}" is "a little boy", "{name}" is "Ben"
STORY_REQUESTS = (
    "Tell me a story about {who} named {name}.",
    "Can you tell me a story about {name}?",
    "Please tell me a story about {who} named {name}.",
    "I want a story about {name}, {who}.",
    "Tell me a short story about {name}.",
)
NEXT_REQUESTS = (
    "Here is the beginning of a story:\n{start}\nWhat happens next?",
    "{start}\nWhat happened next?",
    "Continue this story:\n{start}",
)


def story_about(story: str, rng: random.Random) -> list[dict[str, str]] | None:
    """The user asks for a story about the character the story names; None when it names none."""
    match = NAMED.search(story)
    if match is None:
        return None
    request = rng.choice(STORY_REQUESTS).format(who=match.group(1), name=match.group(2))
    return [{"role": "user", "content": request}, {"role": "assistant", "content": story}]


def what_next(story: str, rng: random.Random) -> list[dict[str, str]] | None:
    """The user gives the first paragraph and asks what happens next; None for a one-paragraph story."""
    paragraphs = story.split("\n")
    if len(paragraphs) < 3:
        return None
    request = rng.choice(NEXT_REQUESTS).format(start=paragraphs[0])
    return [{"role": "user", "content": request}, {"role": "assistant", "content": "\n".join(paragraphs[1:])}]


def build_conversations(text: str, seed: int = SEED) -> list[dict[str, list[dict[str, str]]]]:
    """The conversations made from the short stories of `text` (documents separated by `<|endoftext|>`)."""
    rng = random.Random(seed)
    conversations = []
    for document in split_documents(text):
        story = "\n".join(line.strip() for line in document.splitlines() if line.strip())
        if len(story) > MAX_CHARS:
            continue
        kind = what_next if rng.random() < 0.25 else story_about
        messages = kind(story, rng) or story_about(story, rng)
        if messages is None:
            continue
        if rng.random() < 0.25:
            messages = [{"role": "system", "content": SYSTEM_MESSAGE}, *messages]
        conversations.append({"messages": messages})
    return conversations


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=PACKAGE_DATA, help="output folder (default: tinylm_hf/data)")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for split, source in SOURCES.items():
        conversations = build_conversations((PACKAGE_DATA / source).read_text(encoding="utf-8"))
        lines = "".join(json.dumps(c, ensure_ascii=False) + "\n" for c in conversations)
        path = args.out / STORY_CHATS[split].name
        path.write_text(lines, encoding="utf-8")
        print(f"{path}: {len(conversations)} conversations, {len(lines.encode()):,} bytes, from {source}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
