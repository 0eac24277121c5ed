"""`tinylm lm-eval-tasks`: write tinylm's lm-evaluation-harness task YAMLs with absolute data paths."""

from __future__ import annotations

import argparse

HELP = "write the lm-evaluation-harness task YAMLs (for --include_path)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("out_dir", help="folder for the YAMLs")
    parser.add_argument("--data-file", default=None, help="rolling-task data (.jsonl with 'text', or .txt)")
    parser.add_argument("--cloze-file", default=None, help="multiple-choice data (.jsonl)")


def run(args: argparse.Namespace) -> int:
    from ..evaluation.lm_eval_tasks import write_tasks

    print(write_tasks(args.out_dir, data_file=args.data_file, cloze_file=args.cloze_file))
    return 0
