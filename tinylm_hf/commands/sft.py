"""`tinylm sft`: supervised fine-tuning of a model folder on conversations, then publish it as a chat model.

The data is JSON lines of `{"messages": [{"role": "system"|"user"|"assistant", "content": ...}, ...]}` (the
format of `datasets` and TRL). The loss is on the assistant's turns only (their end-of-turn token included),
one conversation a row; the loop, AdamW, checkpoints, `--resume`, metrics and the model card are `tinylm
train`'s. A model whose tokenizer lacks the chat tokens gets them (and embedding rows for them); the
published folder carries the chat template and stops generating at the end of the assistant's turn.
"""

from __future__ import annotations

import argparse

from ..training.objectives.sections import SFTSection
from .config_flags import add_config_arguments, add_run_arguments, config_from_args

HELP = "fine-tune a model folder on chat conversations (JSON lines of {\"messages\": [...]}) and publish a chat model"
NOT_FLAGS = ("objective", "data_dir")  # `tinylm sft` sets the objective; it reads conversations, not prepared data
FLAGS = {"conversations": "--data", "val_conversations": "--val-data"}  # TrainConfig field -> its flag here


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_run_arguments(parser)
    add_config_arguments(parser, objectives=(SFTSection,), exclude=NOT_FLAGS, flags=FLAGS)


def run(args: argparse.Namespace) -> int:
    from .train import train_and_publish

    return train_and_publish(config_from_args(args, objective=SFTSection.name), args.publish)
