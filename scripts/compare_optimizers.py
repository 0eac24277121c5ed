"""AdamW against Muon with `tinylm train`'s own defaults, at equal steps, printed side by side in one run.

The data is the quickstart's: a 2,048-token BPE tokenizer trained on the bundled TinyStories slice and its token
files (as `tinylm train-tokenizer` / `tinylm prepare` make them). Each run is `tinylm train --preset cpu-quickstart
--batch-size 16 --context-length 128 --warmup-iters 30 --max-iters 300 --optimizer X` (every other setting at
`TrainConfig`'s default, so each optimizer at its own default learning rates), once per seed. A step count, not a
time budget, fixes the comparison, so the machine's load changes only how long it takes.

    python scripts/compare_optimizers.py                                  # adamw and muon, seed 1337
    python scripts/compare_optimizers.py --seeds 1337 7 --steps 300
    python scripts/compare_optimizers.py --variant muon:muon_lr=0.01      # a labelled TrainConfig override

Printed per run: the loop's last validation loss (20 batches, as `tinylm train` logs it) and the loss over the
whole validation file; then per seed each variant's whole-file loss minus AdamW's.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tinylm_hf.corpus.sources import PACKAGE_DATA  # noqa: E402

RECIPE: dict[str, Any] = {"preset": "cpu-quickstart", "batch_size": 16, "context_length": 128, "warmup_iters": 30}


def prepare(work: Path) -> Path:
    """The quickstart's tokenizer and token files under `work` (made once)."""
    from tinylm_hf.corpus import prepare_dataset
    from tinylm_hf.tokenization import EOS_TOKEN
    from tinylm_hf.tokenizer_training import train_tokenizer

    if (work / "data" / "val.bin").is_file():
        return work / "data"
    tokenizer = train_tokenizer([PACKAGE_DATA / "tinystories_train_small.txt"], 2048, [EOS_TOKEN], progress=False)
    tokenizer.save_pretrained(work / "tokenizer")
    prepare_dataset(work / "tokenizer", work / "data", input_files=[PACKAGE_DATA / "tinystories_train_small.txt"],
                    val_files=[PACKAGE_DATA / "tinystories_valid_small.txt"], num_workers=1)
    return work / "data"


def parse_variant(text: str) -> tuple[str, dict[str, Any]]:
    """`label:field=value,field=value` (`muon`, `adamw`: the optimizer alone) -> (label, TrainConfig overrides)."""
    label, _, rest = text.partition(":")
    overrides: dict[str, Any] = {"optimizer": "muon" if label.startswith("muon") else "adamw"}
    for item in filter(None, rest.split(",")):
        key, _, value = item.partition("=")
        overrides[key] = ast.literal_eval(value)
    return label, overrides


def run_one(data_dir: Path, out: Path, overrides: dict[str, Any], steps: int, seed: int, threads: int) -> dict:
    """Train one variant; its last logged validation loss and the whole-file loss of its final weights."""
    from tinylm_hf.modeling import TinyLMForCausalLM
    from tinylm_hf.training import TrainConfig, train
    from tinylm_hf.training.run.checkpoint import read_checkpoint
    from tinylm_hf.training.validation import evaluate_whole_file

    config = TrainConfig(data_dir=str(data_dir), out_dir=str(out), **RECIPE, max_iters=steps, seed=seed,
                         device="cpu", dtype="float32", threads=threads, progress=False, plot=False, sample_tokens=0,
                         overwrite=True, **overrides)
    cpu = time.process_time()
    summary = train(config)
    cpu = time.process_time() - cpu
    checkpoint = read_checkpoint(summary.checkpoint)
    model = TinyLMForCausalLM(checkpoint.tinylm_config())
    model.load_state_dict(checkpoint.model)
    whole = evaluate_whole_file(model, data_dir, RECIPE["context_length"])
    return {"val_loss": round(summary.val_loss, 4), "whole_val_loss": round(whole["val_loss"], 4),
            "train_cpu_s": round(cpu), "load_1min": round(os.getloadavg()[0], 1)}


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1337])
    parser.add_argument("--variant", action="append", default=None,
                        help="label[:field=value,...] (default: adamw and muon at their defaults)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--work", type=Path, default=None, help="folder for tokenizer/data/runs (default: temp)")
    args = parser.parse_args(argv)
    variants = [parse_variant(v) for v in (args.variant or ["adamw", "muon"])]
    print(f"{args.steps} steps, recipe {RECIPE}, {args.threads} thread(s), load average "
          f"{os.getloadavg()[0]:.1f}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}", flush=True)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        work = args.work or Path(tmp)
        data_dir = prepare(work)
        for seed in args.seeds:
            for label, overrides in variants:
                row = {"variant": label, "seed": seed,
                       **run_one(data_dir, work / "runs" / label, overrides, args.steps, seed, args.threads)}
                print(json.dumps(row), flush=True)
                rows.append(row)
    print("| variant | seed | val_loss (20 batches) | whole-file val loss | minus first variant | CPU s |")
    print("|---|---|---|---|---|---|")
    for row in rows:
        first = next(r for r in rows if r["seed"] == row["seed"])
        print(f"| {row['variant']} | {row['seed']} | {row['val_loss']} | {row['whole_val_loss']} | "
              f"{row['whole_val_loss'] - first['whole_val_loss']:+.4f} | {row['train_cpu_s']} |")
    return rows


if __name__ == "__main__":
    main()
