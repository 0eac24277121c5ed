"""Rebuild the bundled preference pairs (tinylm_hf/data/tinystories_preferences_*.jsonl) from the bundled story chats.

Each pair is in TRL's conversational preference format, `{"prompt": [messages], "chosen": [assistant message],
"rejected": [assistant message]}`. The prompt is a bundled conversation in which the user asks for a story about
a character the story introduces ("a little dog named Max"); the chosen reply is that conversation's story, the
rejected reply a story of the same split about another character, one whose name the request does not mention.
Conversations that ask what happens next are not used. The output is the same bytes on every run (a seeded
random stream picks the rejected stories):

    python scripts/build_story_preferences.py            # rewrites the two files in tinylm_hf/data
    python scripts/build_story_preferences.py --out DIR  # writes them into DIR instead
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tinylm_hf.corpus.conversations import load_story_chats  # noqa: E402
from tinylm_hf.corpus.preferences import STORY_PREFERENCES  # noqa: E402
from tinylm_hf.corpus.sources import PACKAGE_DATA  # noqa: E402

SEED = 32
NAMED = re.compile(r"\b(?:a|an) (?:[a-z]+ ){0,3}?[a-z]+ named ([A-Z][a-z]+)\b")  # build_story_chats.py's rule


def named_character(messages: list[dict[str, str]]) -> str | None:
    """The character a "story about" conversation asks for (its story introduces it and the request names it)."""
    request, story = messages[-2]["content"], messages[-1]["content"]
    match = NAMED.search(story)
    if match is None or "\n" in request or match.group(1) not in request:
        return None
    return match.group(1)


def build_pairs(conversations: list[list[dict[str, str]]], seed: int = SEED) -> list[dict[str, list]]:
    """One pair per "story about" conversation: its story chosen, another character's story rejected."""
    rng = random.Random(seed)
    about = [(messages, name) for messages in conversations if (name := named_character(messages))]
    pairs = []
    for messages, name in about:
        request = messages[-2]["content"]
        while True:
            other, other_name = about[rng.randrange(len(about))]
            if other_name != name and other_name not in request:
                break
        pairs.append({"prompt": messages[:-1], "chosen": [messages[-1]], "rejected": [other[-1]]})
    return pairs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=PACKAGE_DATA, help="output folder (default: tinylm_hf/data)")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for split, target in STORY_PREFERENCES.items():
        pairs = build_pairs(load_story_chats(split))
        lines = "".join(json.dumps(pair, ensure_ascii=False) + "\n" for pair in pairs)
        path = args.out / target.name
        path.write_text(lines, encoding="utf-8")
        print(f"{path}: {len(pairs)} pairs, {len(lines.encode()):,} bytes, from the {split} story chats")
    return 0


if __name__ == "__main__":
    sys.exit(main())
