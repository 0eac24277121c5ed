"""MLMCollator throughput per strategy, beside transformers' DataCollatorForLanguageModeling, on one core.

    PYTHONPATH=. python scripts/bench_collator.py [--batch-size 32] [--seq 128] [--seconds 1] [--repeats 3]

Real TinyStories text (the bundled slice), tokenized once by a byte-level BPE trained here with the
`tokenizers` library (a mask token added); the collators then get lists of `{"input_ids": [...]}` of
`--seq` tokens, as `Trainer` hands them, and return torch tensors. Rows are timed round-robin over
`--repeats` rounds (the best round counts) so machine load hits all alike; torch and numpy are held to
one thread (pin the process to one core with `taskset -c 0`). The target is 20,000 sequences of 128
tokens per second per core for every strategy. (transformers' `whole_word_mask=True` needs
`offset_mapping` from re-tokenising text, so it is not in the table.)
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers  # noqa: E402
from transformers import DataCollatorForLanguageModeling, PreTrainedTokenizerFast  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tinylm_hf.training.objectives.masking import STRATEGIES, MLMCollator  # noqa: E402

TEXT = Path(__file__).resolve().parents[1] / "tinylm_hf" / "data" / "tinystories_valid_small.txt"
TARGET = 20_000


def build_tokenizer() -> PreTrainedTokenizerFast:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=2000, special_tokens=["<|endoftext|>", "<|mask|>", "<|pad|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(TEXT.read_text(encoding="utf-8")[:500_000].split("<|endoftext|>"), trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>", mask_token="<|mask|>",
                                   pad_token="<|pad|>")


def best_rate(collate, batches: list[list[dict]], seconds: float) -> float:
    """Sequences per second over as many passes of `batches` as fit in `seconds`."""
    done, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        for batch in batches:
            collate(batch)
            done += len(batch)
    return done / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--seconds", type=float, default=1.0)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(1)
    tok = build_tokenizer()
    ids = np.asarray(tok(TEXT.read_text(encoding="utf-8"), add_special_tokens=False)["input_ids"])
    rows = ids[: len(ids) // args.seq * args.seq].reshape(-1, args.seq)[:2048].tolist()
    batches = [[{"input_ids": r} for r in rows[i : i + args.batch_size]] for i in range(0, len(rows), args.batch_size)]
    candidates = {f"MLMCollator {s}": MLMCollator(tok, s, seed=0) for s in STRATEGIES}
    candidates["HF DataCollatorForLanguageModeling"] = DataCollatorForLanguageModeling(tok, seed=0)
    rates: dict[str, float] = {}
    for _ in range(args.repeats):
        for name, collate in candidates.items():
            rates[name] = max(rates.get(name, 0.0), best_rate(collate, batches, args.seconds))
    baseline = rates["HF DataCollatorForLanguageModeling"]
    print(f"batches of {args.batch_size} x {args.seq} tokens, one thread, load average {os.getloadavg()[0]:.1f}")
    print(f"| collator | sequences/s | vs HF dynamic | >= {TARGET:,}/s |")
    print("|---|---:|---:|:---:|")
    for name, rate in rates.items():
        print(f"| {name} | {rate:,.0f} | {rate / baseline:.2f}x | {'yes' if rate >= TARGET else 'no'} |")


if __name__ == "__main__":
    main()
