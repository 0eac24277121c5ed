"""`tinylm dpo`: preference tuning (DPO) of a chat model folder on preference pairs, then publish it as a chat model.

The data is JSON lines in TRL's preference format: `{"prompt": [messages], "chosen": [assistant message],
"rejected": [assistant message]}` (rendered with the folder's chat template) or plain strings `{"prompt": str,
"chosen": str, "rejected": str}`. The loss is DPO's sigmoid loss on the completions' tokens, against the frozen
`--init-from` model; the loop, AdamW, checkpoints, `--resume`, the time budget and the model card are `tinylm
train`'s. The published folder keeps the chat template and stops at the end of the assistant's turn.
"""

from __future__ import annotations

import argparse

from ..training.objectives.sections import PreferenceSection
from .config_flags import add_config_arguments, add_run_arguments, config_from_args

HELP = "preference-tune a chat model folder with DPO on pairs (JSON lines of {\"prompt\", \"chosen\", \"rejected\"})"
# `tinylm dpo` sets the objective, reads pairs rather than prepared data, and scores every validation pair
NOT_FLAGS = ("objective", "data_dir", "eval_iters")
FLAGS = {"preferences": "--data", "val_preferences": "--val-data", "dpo_beta": "--beta"}  # field -> its flag here
OLD_FLAGS = {"val_preferences": ("--valid-data",)}  # field -> its former flags, taken for one release


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_run_arguments(parser)
    add_config_arguments(parser, objectives=(PreferenceSection,), exclude=NOT_FLAGS, flags=FLAGS, old_flags=OLD_FLAGS)


def run(args: argparse.Namespace) -> int:
    from .train import train_and_publish

    return train_and_publish(config_from_args(args, objective=PreferenceSection.name), args.publish)
