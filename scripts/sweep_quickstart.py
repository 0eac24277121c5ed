"""Choose the quickstart recipe by measurement: validation bits per byte after an equal training budget.

Each candidate (optimizer, model width/depth, vocabulary, batch x context, learning rate and schedule)
trains with `tinylm_hf.training.train` on the bundled TinyStories slice, either for the same budget of
**process CPU time** (`--budget`; `time_budget_clock="process"`, one thread by default), so that a
machine shared with other programs still gives every candidate the same compute (the loop re-plans its
step count on that clock), or for the same number of steps (`--steps`), which no load changes. Each
run is then scored on the whole validation file (bits per byte: summed nats / ln 2 / the file's bytes,
so vocabularies of different sizes compare fairly). Tokenizers and token files are made once per
vocabulary size and reused.

    python scripts/sweep_quickstart.py --budget 150                      # every candidate, 150 CPU-s each
    python scripts/sweep_quickstart.py --budget 150 --only base muon     # AdamW vs Muon, same CPU budget
    python scripts/sweep_quickstart.py --steps 600 --only base muon      # AdamW vs Muon, same step count
    python scripts/sweep_quickstart.py --list                            # the candidates

The ranking at a short budget favours small models and high learning rates a little more than the
quickstart's 6 minutes on two cores would; read the table with that in mind.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tinylm_hf.quickstart import PACKAGE_DATA  # noqa: E402

# the quickstart's recipe before this sweep; every candidate changes a few of these
BASE: dict[str, Any] = {
    "vocab_size": 2048, "hidden_size": 128, "intermediate_size": 352, "num_hidden_layers": 4,
    "num_attention_heads": 4, "batch_size": 16, "context_length": 128, "max_lr": 3e-3, "min_lr": 3e-4,
    "warmup_fraction": 0.05, "optimizer": "adamw", "muon_lr": 0.02,
}  # fmt: skip
CANDIDATES: dict[str, dict[str, Any]] = {
    "base": {},
    "muon": {"optimizer": "muon"},
    "muon-lr0.01": {"optimizer": "muon", "muon_lr": 0.01},
    "muon-lr0.04": {"optimizer": "muon", "muon_lr": 0.04},
    "muon-adamw6e-3": {"optimizer": "muon", "max_lr": 6e-3, "min_lr": 6e-4},
    "muon-adamw1e-3": {"optimizer": "muon", "max_lr": 1e-3, "min_lr": 1e-4},
    "lr6e-3": {"max_lr": 6e-3, "min_lr": 6e-4},
    "lr6e-3-min0": {"max_lr": 6e-3, "min_lr": 6e-5},
    "vocab4096": {"vocab_size": 4096},
    "vocab1024": {"vocab_size": 1024},
    "ctx256-b8": {"context_length": 256, "batch_size": 8},
    "b8": {"batch_size": 8},
    "b32": {"batch_size": 32},
    "wide192": {"hidden_size": 192, "intermediate_size": 512, "num_attention_heads": 6},
    "deep6": {"num_hidden_layers": 6},
    "shallow2-wide256": {"hidden_size": 256, "intermediate_size": 688, "num_hidden_layers": 2,
                         "num_attention_heads": 8},
}
MODEL_KEYS = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads")


def recipe(name: str, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """The base recipe with candidate `name`'s changes (and `extra` on top)."""
    if name not in CANDIDATES:
        raise ValueError(f"unknown candidate {name!r}; choose from {sorted(CANDIDATES)}")
    return {**BASE, **CANDIDATES[name], **(extra or {})}


def prepare(work: Path, vocab_size: int) -> Path:
    """Tokenizer folder + token files for one vocabulary size (made once, then reused)."""
    from tinylm_hf.corpus import prepare_dataset
    from tinylm_hf.tokenization import EOS_TOKEN
    from tinylm_hf.tokenizer_training import train_tokenizer

    folder = work / f"vocab{vocab_size}"
    if (folder / "data" / "val.bin").is_file():
        return folder
    tokenizer = train_tokenizer([PACKAGE_DATA / "tinystories_train_small.txt"], vocab_size, [EOS_TOKEN],
                                progress=False)
    tokenizer.save_pretrained(folder / "tokenizer")
    prepare_dataset(folder / "tokenizer", folder / "data", input_files=[PACKAGE_DATA / "tinystories_train_small.txt"],
                    val_files=[PACKAGE_DATA / "tinystories_valid_small.txt"], num_workers=1)
    return folder


def full_validation_bpb(summary, data_dir: Path, r: dict[str, Any]) -> tuple[float, float]:
    """(loss, bits per byte) of the final weights over the whole validation file."""
    from tinylm_hf.modeling import TinyLMForCausalLM
    from tinylm_hf.training.run.checkpoint import read_checkpoint
    from tinylm_hf.training.validation import evaluate_whole_file

    model = TinyLMForCausalLM(_model_config(r))
    model.load_state_dict(read_checkpoint(summary.checkpoint).model)
    result = evaluate_whole_file(model, data_dir, r["context_length"])
    return result["val_loss"], result["val_bpb"]


def _model_config(r: dict[str, Any]):
    from tinylm_hf.modeling import TinyLMConfig

    return TinyLMConfig.from_preset("cpu-quickstart", max_position_embeddings=r["context_length"],
                                    **{k: r[k] for k in MODEL_KEYS})


def run_candidate(name: str, work: Path, budget_s: float | None, threads: int, extra: dict[str, Any] | None = None,
                  *, steps: int | None = None) -> dict:
    """Train one candidate for `budget_s` CPU seconds, or for `steps` steps; its row of the table."""
    from tinylm_hf.training import TrainConfig, train

    r = recipe(name, extra)
    folder = prepare(work, r["vocab_size"])
    max_iters = steps or 100_000  # without steps the budget decides; this only bounds the schedule
    config = TrainConfig(
        data_dir=str(folder / "data"), out_dir=str(work / "runs" / name), preset="cpu-quickstart",
        model={**{k: r[k] for k in MODEL_KEYS}, "max_position_embeddings": r["context_length"]},
        batch_size=r["batch_size"], context_length=r["context_length"], max_iters=max_iters,
        time_budget_s=None if steps else budget_s, time_budget_clock="process", max_lr=r["max_lr"], min_lr=r["min_lr"],
        optimizer=r["optimizer"], muon_lr=r["muon_lr"],
        warmup_iters=round(r["warmup_fraction"] * max_iters), weight_decay=0.1, grad_clip=1.0, eval_every=0,
        checkpoint_every=0, keep_last=1, device="cpu", dtype="float32", threads=threads, progress=False,
        plot=False, sample_tokens=0, overwrite=True,
    )  # fmt: skip
    wall, cpu = time.perf_counter(), time.process_time()
    summary = train(config)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    loss, bpb = full_validation_bpb(summary, folder / "data", r)
    return {"candidate": name, "optimizer": r["optimizer"], "params_M": round(sum(_param_counts(r)) / 1e6, 2), "steps": summary.iterations,
            "tokens_M": round(summary.tokens / 1e6, 2), "train_cpu_s": round(cpu, 0), "train_wall_s": round(wall, 0),
            "val_loss": round(loss, 4), "val_bpb": round(bpb, 4)}


def _param_counts(r: dict[str, Any]) -> tuple[int, int]:
    """(embedding + head, decoder) parameters of recipe `r` (untied head)."""
    h, f, n, v = r["hidden_size"], r["intermediate_size"], r["num_hidden_layers"], r["vocab_size"]
    return 2 * v * h, n * (4 * h * h + 3 * h * f + 2 * h) + h


def print_table(rows: list[dict]) -> None:
    keys = list(rows[0])
    print("| " + " | ".join(keys) + " |")
    print("|" + "|".join("---" for _ in keys) + "|")
    for row in sorted(rows, key=lambda row: row["val_bpb"]):
        print("| " + " | ".join(str(row[k]) for k in keys) + " |")


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=float, default=150.0, help="process CPU seconds of training per candidate")
    parser.add_argument("--steps", type=int, default=None,
                        help="train every candidate this many steps instead of for --budget (a load-free comparison)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (1: CPU time = compute)")
    parser.add_argument("--only", nargs="*", default=None, help="candidates to run (default: all)")
    parser.add_argument("--work", type=Path, default=None, help="folder for tokenizers/data/runs (default: temp)")
    parser.add_argument("--json", type=Path, default=None, help="append each row to this JSON-lines file")
    parser.add_argument("--list", action="store_true", help="print the candidates and exit")
    args = parser.parse_args(argv)
    if args.list:
        for name in CANDIDATES:
            print(f"{name}: {recipe(name)}")
        return []
    names = args.only or list(CANDIDATES)
    for name in names:
        recipe(name)  # unknown names fail before any training
    limit = f"{args.steps} steps" if args.steps else f"budget {args.budget:.0f} process CPU s"
    print(f"{limit} per candidate, {args.threads} thread(s), load average {os.getloadavg()[0]:.1f}", flush=True)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        work = args.work or Path(tmp)
        for name in names:
            row = run_candidate(name, work, args.budget, args.threads, steps=args.steps)
            row["load_1min"] = round(os.getloadavg()[0], 1)
            print(json.dumps(row), flush=True)
            if args.json is not None:
                with args.json.open("a") as fh:
                    fh.write(json.dumps(row) + "\n")
            rows.append(row)
    print_table(rows)
    if not all(math.isfinite(row["val_bpb"]) for row in rows):
        print("some candidates diverged (bits/byte not finite)")
    return rows


if __name__ == "__main__":
    main()
