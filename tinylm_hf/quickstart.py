"""`tinylm quickstart`: the whole pipeline on the bundled TinyStories slice, on the CPU, in minutes.

1. train a byte-level BPE tokenizer (`train_bpe`) and save it as a Hugging Face tokenizer folder;
2. tokenize the corpus with `prepare_dataset` (train.bin / val.bin);
3. train a small TinyLM (`cpu-quickstart` preset) with our loop;
4. reload the saved folder with `AutoTokenizer` / `AutoModelForCausalLM` and print a few stories.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

PACKAGE_DATA = Path(__file__).resolve().parent / "data"
EOS = "<|endoftext|>"
PROMPTS = ("Once upon a time", "Lily and Ben went to the park.", "The little dog")


def build_tokenizer(train_file: Path, vocab_size: int, out: Path) -> Path:
    """Train BPE on `train_file` and save a `TinyLMTokenizer` folder at `out`."""
    from tinylm_hf.tokenization import BPETokenizer, TinyLMTokenizer, train_bpe

    vocab, merges = train_bpe(train_file, vocab_size, [EOS])
    raw_dir = out / "bpe"
    vocab_path, merges_path = BPETokenizer(vocab, merges, [EOS]).save(raw_dir)
    tokenizer = TinyLMTokenizer(vocab_file=str(vocab_path), merges_file=str(merges_path))
    tokenizer.save_pretrained(out)
    return out


def pick_threads() -> int:
    """Intra-op threads for the CPU run: the cores not already busy (oversubscribed threads spin and stall)."""
    import os

    cores = os.cpu_count() or 1
    try:
        busy = int(round(os.getloadavg()[0]))
    except OSError:  # pragma: no cover (no load average on this platform)
        busy = 0
    return max(1, min(cores, cores - busy))


def calibrate_iters(preset: str, model_overrides: dict[str, Any], batch_size: int, context_length: int,
                    budget_s: float, cap: int) -> tuple[int, float]:
    """Steps that fit in `budget_s`, from timing a few training steps of the same shape on a throwaway model."""
    import torch

    from tinylm_hf.modeling import TinyLMConfig, TinyLMForCausalLM
    from tinylm_hf.training import AdamW, cross_entropy

    model = TinyLMForCausalLM(TinyLMConfig.from_preset(preset, **model_overrides))
    opt = AdamW(model.parameters(), lr=1e-4)
    x = torch.randint(0, model.config.vocab_size, (batch_size, context_length))
    times = []
    for _ in range(7):
        t = time.perf_counter()
        cross_entropy(model(input_ids=x).logits, x).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        times.append(time.perf_counter() - t)
    step_s = sorted(times[3:])[1]  # the first steps pay for allocator warm-up; lower median of the rest
    # evaluations and checkpoints cost ~5% on top of the steps
    return max(20, min(cap, int(budget_s / (step_s * 1.05)))), step_s


def quickstart(
    out_dir: str | Path = "runs/quickstart",
    train_file: str | Path | None = None,
    val_file: str | Path | None = None,
    vocab_size: int = 2048,
    max_iters: int | None = None,
    train_budget_s: float = 360.0,
    batch_size: int = 16,
    context_length: int = 128,
    preset: str = "cpu-quickstart",
    model_overrides: dict[str, Any] | None = None,
    max_new_tokens: int = 120,
    seed: int = 1337,
) -> dict[str, Any]:
    """Run the pipeline end to end; returns the training summary plus the generated stories."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    import tinylm_hf  # noqa: F401  (registers TinyLM with the Auto classes)
    from tinylm_hf.training.config import TrainConfig
    from tinylm_hf.training.data import prepare_dataset
    from tinylm_hf.training.loop import train

    out = Path(out_dir)
    threads = pick_threads()
    torch.set_num_threads(threads)
    train_file = Path(train_file or PACKAGE_DATA / "tinystories_train_small.txt")
    val_file = Path(val_file or PACKAGE_DATA / "tinystories_valid_small.txt")
    t0 = time.perf_counter()

    print(f"[1/4] training a {vocab_size}-token BPE tokenizer on {train_file.name}")
    tok_dir = build_tokenizer(train_file, vocab_size, out / "tokenizer")
    print(f"      done in {time.perf_counter() - t0:.0f}s -> {tok_dir}")

    print("[2/4] tokenizing the corpus (datasets)")
    headers = prepare_dataset(tok_dir, out / "data", input_files=[train_file], val_files=[val_file])
    print(f"      train {headers['train']['count']:,} tokens, val {headers['val']['count']:,} tokens "
          f"({time.perf_counter() - t0:.0f}s)")

    overrides = {"vocab_size": vocab_size, "max_position_embeddings": context_length, **(model_overrides or {})}
    if max_iters is None:
        max_iters, step_s = calibrate_iters(preset, overrides, batch_size, context_length, train_budget_s, cap=3000)
        print(f"      {step_s:.2f}s a step on {threads} thread(s): {max_iters} steps fit in {train_budget_s:.0f}s")
    print(f"[3/4] training a {preset} TinyLM for {max_iters} steps on the CPU")
    config = TrainConfig(
        data_dir=str(out / "data"), tokenizer_dir=str(tok_dir), out_dir=str(out / "train"), preset=preset,
        model=overrides,
        batch_size=batch_size, context_length=context_length, max_iters=max_iters,
        max_lr=3e-3, min_lr=3e-4, warmup_iters=max(1, max_iters // 20), weight_decay=0.1, grad_clip=1.0,
        eval_every=max(1, max_iters // 5), eval_iters=20, checkpoint_every=max(1, max_iters // 5), keep_last=1,
        device="cpu", dtype="float32", seed=seed,
    )
    summary = train(config)
    print(f"      done in {time.perf_counter() - t0:.0f}s")

    hf_dir = Path(summary["hf_dir"])
    print(f"[4/4] reloading {hf_dir} with AutoTokenizer / AutoModelForCausalLM and generating")
    tokenizer = AutoTokenizer.from_pretrained(hf_dir)
    model = AutoModelForCausalLM.from_pretrained(hf_dir).eval()
    torch.manual_seed(seed)
    stories = []
    for prompt in PROMPTS:
        ids = tokenizer(prompt, return_tensors="pt")
        with torch.no_grad():
            gen = model.generate(**ids, max_new_tokens=max_new_tokens, do_sample=True, temperature=0.7, top_k=40,
                                 pad_token_id=tokenizer.eos_token_id)
        stories.append(tokenizer.decode(gen[0], skip_special_tokens=True))
    for i, story in enumerate(stories, 1):
        print(f"\n--- story {i} ---\n{story}")
    print(f"\nvalidation loss {summary['final_val_loss']:.3f} (perplexity {summary['val_perplexity']:.1f}, "
          f"{summary.get('val_bpb', float('nan')):.3f} bits/byte) after {summary['tokens']:,} training tokens; "
          f"total {time.perf_counter() - t0:.0f}s")
    print(f"model folder: {hf_dir}")
    return {**summary, "stories": stories, "total_s": time.perf_counter() - t0}


def add_quickstart_parser(subparsers: Any) -> None:
    """`tinylm quickstart [--out DIR] [...]`: everything runs with no arguments."""
    p = subparsers.add_parser("quickstart", help="tokenizer + data + a small model on bundled TinyStories (CPU)")
    p.add_argument("--out", default="runs/quickstart", help="output folder (default: runs/quickstart)")
    p.add_argument("--train-file", default=None, help="training text (default: bundled TinyStories slice)")
    p.add_argument("--val-file", default=None, help="validation text (default: bundled TinyStories valid slice)")
    p.add_argument("--vocab-size", type=int, default=2048, help="BPE vocabulary size (default: 2048)")
    p.add_argument("--max-iters", type=int, default=None,
                   help="training steps (default: as many as fit in --train-budget seconds)")
    p.add_argument("--train-budget", type=float, default=360.0, help="seconds of training when --max-iters is unset")
    p.add_argument("--batch-size", type=int, default=16, help="sequences per step (default: 16)")
    p.add_argument("--context-length", type=int, default=128, help="tokens per sequence (default: 128)")
    p.add_argument("--max-new-tokens", type=int, default=120, help="tokens generated per story")
    p.set_defaults(func=_run_quickstart)


def _run_quickstart(args: argparse.Namespace) -> int:
    quickstart(args.out, train_file=args.train_file, val_file=args.val_file, vocab_size=args.vocab_size,
               max_iters=args.max_iters, train_budget_s=args.train_budget, batch_size=args.batch_size, context_length=args.context_length,
               max_new_tokens=args.max_new_tokens)
    return 0
