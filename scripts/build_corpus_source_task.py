"""Rebuild tinylm_hf/data/corpus_source_{train,validation,test}.jsonl from ../shared/data (same bytes every time).

The corpus-source task (tinylm_hf/corpus/source_task.py): which corpus does a passage come from? Passages
are non-overlapping runs of PASSAGE_WORDS words, whitespace collapsed to single spaces, cut from:

1. TinyStories: train from `tinystories_train_small.txt`; validation from the first half of the documents
   of `tinystories_valid_small.txt`, test from the second half.
2. Shakespeare: `tiny_shakespeare.txt` as one text, its words cut 80% / 10% / 10% in order.
3. Novels: the 71 books of `pd_novels_heldout.txt`, split by book (book i: test if i % 10 == 0,
   validation if i % 10 == 5, else train).

For each split and label, PER_LABEL[split] passages are drawn without replacement (random.Random(SEED)),
then each split is shuffled. No passage crosses a document boundary, and no source text is in two splits.

    python scripts/build_corpus_source_task.py [--shared-data DIR] [--out tinylm_hf/data]
"""

from __future__ import annotations

import argparse
import json
import os
import random
from pathlib import Path

from tinylm_hf.corpus.source_task import DATA_DIR, PASSAGE_WORDS, PER_LABEL, SOURCE_LABELS, SPLITS, source_task_path

SEED = 24
SEPARATOR = "<|endoftext|>"
SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def read_documents(path: Path) -> list[list[str]]:
    """The words of each `<|endoftext|>`-separated document of a file."""
    text = path.read_text(encoding="utf-8")
    return [words for words in (doc.split() for doc in text.split(SEPARATOR)) if words]


def passages(documents: list[list[str]]) -> list[str]:
    """Every whole run of PASSAGE_WORDS words, document by document, none overlapping."""
    return [
        " ".join(words[start : start + PASSAGE_WORDS])
        for words in documents
        for start in range(0, len(words) - PASSAGE_WORDS + 1, PASSAGE_WORDS)
    ]


def split_in_order(words: list[str]) -> dict[str, list[list[str]]]:
    """One long text cut 80 / 10 / 10 by position into train / validation / test."""
    a, b = int(len(words) * 0.8), int(len(words) * 0.9)
    return {"train": [words[:a]], "validation": [words[a:b]], "test": [words[b:]]}


def source_documents(shared: Path) -> dict[str, dict[str, list[list[str]]]]:
    """label -> split -> documents (lists of words)."""
    valid_stories = read_documents(shared / "tinystories_valid_small.txt")
    half = len(valid_stories) // 2
    shakespeare = [w for doc in read_documents(shared / "tiny_shakespeare.txt") for w in doc]
    books = read_documents(shared / "pd_novels_heldout.txt")
    book_split = {0: "test", 5: "validation"}
    return {
        "tinystories": {
            "train": read_documents(shared / "tinystories_train_small.txt"),
            "validation": valid_stories[:half],
            "test": valid_stories[half:],
        },
        "shakespeare": split_in_order(shakespeare),
        "novel": {split: [book for i, book in enumerate(books) if book_split.get(i % 10, "train") == split]
                  for split in SPLITS},
    }


def build_split(sources: dict[str, dict[str, list[list[str]]]], split: str, rng: random.Random) -> list[dict]:
    """PER_LABEL[split] passages of each label, drawn without replacement, then shuffled together."""
    examples = []
    for label, name in enumerate(SOURCE_LABELS):
        pool = passages(sources[name][split])
        if len(pool) < PER_LABEL[split]:
            raise SystemExit(f"error: only {len(pool)} {name} passages for {split}, need {PER_LABEL[split]}")
        examples += [{"text": text, "label": label} for text in rng.sample(pool, PER_LABEL[split])]
    rng.shuffle(examples)
    return examples


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared-data", type=Path, default=Path(os.environ.get("TINYLM_SHARED_DATA", SHARED_DATA)),
                        help="folder of the shared corpora (default: $TINYLM_SHARED_DATA, else ../shared/data)")
    parser.add_argument("--out", type=Path, default=DATA_DIR)
    args = parser.parse_args(argv)
    sources = source_documents(args.shared_data)
    rng = random.Random(SEED)
    args.out.mkdir(parents=True, exist_ok=True)
    for split in SPLITS:
        lines = [json.dumps(example, ensure_ascii=False) for example in build_split(sources, split, rng)]
        path = source_task_path(split, args.out)
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        print(f"{path}: {len(lines)} passages, {path.stat().st_size:,} bytes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
