"""`tinylm generate`: load a model folder and stream samples to the terminal."""

from __future__ import annotations

import argparse
import sys

HELP = "sample text from a model folder, streamed as it is produced"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("dir", help="model folder loadable with the Auto classes")
    parser.add_argument("--prompt", required=True, help="prompt text (plain text: see --allow-special)")
    parser.add_argument("--max-new-tokens", type=int, default=100)
    parser.add_argument("--temperature", type=float, default=1.0, help="0 = greedy")
    parser.add_argument("--top-p", type=float, default=None, help="nucleus sampling mass in (0, 1]")
    parser.add_argument("--top-k", type=int, default=None, help="sample among the k likeliest tokens (0 = off)")
    parser.add_argument("--seed", type=int, default=None, help="sample i uses seed + i")
    parser.add_argument("--num-samples", type=int, default=1)
    parser.add_argument("--allow-special", action="store_true",
                        help="read special-token text in the prompt (e.g. <|endoftext|>) as the control token")
    parser.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N, mps or auto")
    parser.add_argument("--threads", type=int, default=None, help="CPU threads (default: physical cores)")
    parser.add_argument("--trust-remote-code", action="store_true",
                        help="allow running the folder's own *.py files (only for folders you trust)")


def run(args: argparse.Namespace) -> int:
    from ..generation import check_sampling, generate_text
    from ..publish import load_folder
    from ..runtime import resolve_device, set_threads
    from ..training.config import check_seed

    if args.num_samples < 1:
        raise ValueError(f"--num-samples must be >= 1, got {args.num_samples}")
    check_sampling(args.temperature, args.top_p, args.top_k, args.max_new_tokens)
    if args.seed is not None:  # every sample's seed, before the first prompt is printed
        check_seed(args.seed, "--seed")
        check_seed(args.seed + args.num_samples - 1, "--seed (plus --num-samples - 1)")
    set_threads(args.threads)
    model, tokenizer = load_folder(args.dir, trust_remote_code=args.trust_remote_code)
    model = model.to(resolve_device(args.device)).eval()
    for i in range(args.num_samples):
        if args.num_samples > 1:
            print(f"--- sample {i + 1} ---")
        print(args.prompt, end="", flush=True)
        generate_text(
            model, tokenizer, args.prompt, max_new_tokens=args.max_new_tokens, temperature=args.temperature,
            top_p=args.top_p, top_k=args.top_k, seed=None if args.seed is None else args.seed + i, stream=True,
            allow_special=args.allow_special, notify=lambda message: print(f"\n{message}", file=sys.stderr),
        )
    return 0
