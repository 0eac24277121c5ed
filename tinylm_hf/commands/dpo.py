"""`tinylm dpo`: preference tuning (DPO) of a chat model folder on preference pairs, then publish it as a chat model.

The data is JSON lines in TRL's preference format: `{"prompt": [messages], "chosen": [assistant message],
"rejected": [assistant message]}` (rendered with the folder's chat template) or plain strings `{"prompt": str,
"chosen": str, "rejected": str}`. The loss is DPO's sigmoid loss on the completions' tokens, against the frozen
`--init-from` model; the loop, AdamW, checkpoints, `--resume`, the time budget and the model card are `tinylm
train`'s. The published folder keeps the chat template and stops at the end of the assistant's turn.
"""

from __future__ import annotations

import argparse

from .config_flags import (
    CONVERSATION_FIELDS,
    LABELLED_FIELDS,
    add_config_arguments,
    add_run_arguments,
    config_from_args,
)

HELP = "preference-tune a chat model folder with DPO on pairs (JSON lines of {\"prompt\", \"chosen\", \"rejected\"})"
# fields `tinylm dpo` sets itself or names otherwise (--data, --valid-data, --beta)
OWN_FIELDS = ("objective", "masking", "mlm_probability", "data_dir", "preferences", "val_preferences", "dpo_beta")
NOT_USED = ("eval_iters",)  # every evaluation scores every validation pair


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data", dest="preferences", default=argparse.SUPPRESS,
                        help='JSON-lines preference pairs ({"prompt", "chosen", "rejected"} a line, TRL\'s format)')
    parser.add_argument("--valid-data", dest="val_preferences", default=argparse.SUPPRESS,
                        help="JSON-lines pairs to validate on (default: the trailing 5%% of --data)")
    parser.add_argument("--beta", dest="dpo_beta", type=float, default=argparse.SUPPRESS,
                        help="DPO's beta: how far the model may move from the --init-from model (default: 0.1)")
    add_run_arguments(parser)
    add_config_arguments(parser, exclude=OWN_FIELDS + NOT_USED + LABELLED_FIELDS + CONVERSATION_FIELDS)


def run(args: argparse.Namespace) -> int:
    from .train import train_and_publish

    return train_and_publish(config_from_args(args, objective="dpo"), args.publish)
