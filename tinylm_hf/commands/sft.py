"""`tinylm sft`: supervised fine-tuning of a model folder on conversations, then publish it as a chat model.

The data is JSON lines of `{"messages": [{"role": "system"|"user"|"assistant", "content": ...}, ...]}` (the
format of `datasets` and TRL). The loss is on the assistant's turns only (their end-of-turn token included),
one conversation a row; the loop, AdamW, checkpoints, `--resume`, metrics and the model card are `tinylm
train`'s. A model whose tokenizer lacks the chat tokens gets them (and embedding rows for them); the
published folder carries the chat template and stops generating at the end of the assistant's turn.
"""

from __future__ import annotations

import argparse

from .config_flags import LABELLED_FIELDS, PREFERENCE_FIELDS, add_config_arguments, add_run_arguments, config_from_args

HELP = "fine-tune a model folder on chat conversations (JSON lines of {\"messages\": [...]}) and publish a chat model"
# fields `tinylm sft` sets itself or names otherwise (--data, --val-data)
OWN_FIELDS = ("objective", "masking", "mlm_probability", "data_dir", "conversations", "val_conversations")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data", dest="conversations", default=argparse.SUPPRESS,
                        help='JSON-lines conversations to fine-tune on ({"messages": [{"role", "content"}, ...]} a line)')
    parser.add_argument("--val-data", dest="val_conversations", default=argparse.SUPPRESS,
                        help="JSON-lines conversations to validate on (default: the trailing 5%% of --data)")
    add_run_arguments(parser)
    add_config_arguments(parser, exclude=OWN_FIELDS + LABELLED_FIELDS + PREFERENCE_FIELDS)


def run(args: argparse.Namespace) -> int:
    from .train import train_and_publish

    return train_and_publish(config_from_args(args, objective="sft"), args.publish)
