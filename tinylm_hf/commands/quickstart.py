"""`tinylm quickstart`: tokenizer + data + a small model on the bundled TinyStories slice (CPU); no arguments needed.
With --chat, the model is then fine-tuned on the bundled story conversations and answers requests for stories."""

from __future__ import annotations

import argparse

from .old_flags import add_old_flags

EXIT_INTERRUPTED = 130  # as `tinylm train` after Ctrl-C: the checkpoint kept, nothing published
HELP = "tokenizer + data + a small model on bundled TinyStories (CPU)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", default="runs/quickstart", help="output folder (default: runs/quickstart)")
    parser.add_argument("--train-file", default=None, help="training text (default: bundled TinyStories slice)")
    val_data = parser.add_argument("--val-data", default=None,
                                   help="validation text (default: bundled TinyStories valid slice)")
    add_old_flags(parser, val_data, "--val-file")
    parser.add_argument("--vocab-size", type=int, default=2048, help="BPE vocabulary size (default: 2048)")
    parser.add_argument("--max-iters", type=int, default=None,
                        help="training steps (default: as many as fit in --time-budget-s seconds)")
    time_budget = parser.add_argument("--time-budget-s", type=float, default=360.0,
                                      help="seconds of training when --max-iters is unset (default: 360)")
    add_old_flags(parser, time_budget, "--time-budget", "--train-budget")
    parser.add_argument("--batch-size", type=int, default=None, help="sequences per step (default: 16; 8 with --chat)")
    parser.add_argument("--context-length", type=int, default=None,
                        help="tokens per sequence (default: 128; 256 with --chat)")
    parser.add_argument("--max-new-tokens", type=int, default=120, help="tokens generated per story")
    parser.add_argument("--threads", type=int, default=None, help="CPU threads (default: physical cores)")
    parser.add_argument("--chat", action="store_true",
                        help="then fine-tune the model on the bundled story conversations (as `tinylm sft`) and print "
                             "its replies to a few requests; talk to it with `tinylm chat OUT/chat/hf`")
    chat_budget = parser.add_argument("--chat-time-budget-s", type=float, default=None,
                                      help="seconds of fine-tuning with --chat when --chat-max-iters is unset "
                                           "(default: 120)")
    add_old_flags(parser, chat_budget, "--chat-budget")
    parser.add_argument("--chat-max-iters", type=int, default=None, help="fine-tuning steps with --chat")
    parser.add_argument("--optimizer", choices=("muon", "adamw"), default=None,
                        help="muon: Muon for the block matrices, AdamW for the rest; adamw: AdamW for all (default: the "
                             "one the recipe sweep measured better, muon)")


def run(args: argparse.Namespace) -> int:
    from ..quickstart import quickstart

    result = quickstart(args.out, train_file=args.train_file, val_file=args.val_data, vocab_size=args.vocab_size,
                        max_iters=args.max_iters, train_budget_s=args.time_budget_s, batch_size=args.batch_size,
                        context_length=args.context_length, max_new_tokens=args.max_new_tokens, threads=args.threads,
                        chat=args.chat, chat_budget_s=args.chat_time_budget_s, chat_max_iters=args.chat_max_iters,
                        **({"optimizer": args.optimizer} if args.optimizer else {}))
    interrupted = result.get("interrupted") or result.get("chat", {}).get("interrupted")
    return EXIT_INTERRUPTED if interrupted else 0
