"""Where a cold `BPETokenizer.encode` spends its CPU time: the merge loop on missed pre-tokens vs the rest.

    PYTHONPATH=. python scripts/profile_encode.py [--data ../shared/data] [--novels-mb 3]

For each corpus of `bench_encode.read_corpora` (the measured text, cold tokenizer), prints the CPU
seconds of the whole encode, of `_merge_words` (the pre-tokens the table lacked, merged in Python by
`BatchMerger`, `merge_short` and `merge_by_heap`), and tiktoken's `encode_ordinary` on the same text.
The merge share is the floor a table cannot remove: text whose pre-tokens are not vocabulary entries.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_encode  # noqa: E402
from tinylm_hf.tokenization.bpe import BPETokenizer  # noqa: E402


def profile_corpus(tok: BPETokenizer, text: str) -> dict[str, float]:
    """CPU seconds of one cold encode, of its merges of missed pre-tokens, and of tiktoken."""
    fresh = BPETokenizer(tok.vocab, tok.merges, tok.special_tokens)
    merging = [0.0]
    merge_words = fresh._merge_words

    def timed_merge(words: list[str]) -> dict[str, list[int]]:
        start = time.process_time()
        try:
            return merge_words(words)
        finally:
            merging[0] += time.process_time() - start

    fresh._merge_words = timed_merge
    start = time.process_time()
    fresh.encode(text)
    total = time.process_time() - start
    enc = bench_encode.make_tiktoken(tok)
    start = time.process_time()
    enc.encode_ordinary(text)
    return {"total": total, "merge": merging[0], "tiktoken": time.process_time() - start}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path(os.environ.get("TINYLM_SHARED_DATA", "../shared/data")))
    parser.add_argument("--novels-mb", type=float, default=3.0)
    args = parser.parse_args()
    tok = bench_encode.load_gpt2(args.data)
    print("| corpus | cold encode CPU s | of which merging misses | rest | tiktoken CPU s |")
    print("|---|---:|---:|---:|---:|")
    for title, (text, _) in bench_encode.read_corpora(args.data, args.novels_mb).items():
        row = profile_corpus(tok, text)
        print(f"| {title} | {row['total']:.3f} | {row['merge']:.3f} ({row['merge'] / row['total']:.0%}) | "
              f"{row['total'] - row['merge']:.3f} | {row['tiktoken']:.3f} |")


if __name__ == "__main__":
    main()
