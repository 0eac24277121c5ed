"""`tinylm finetune`: fine-tune a TinyLM folder (causal or masked-LM) on labelled texts, with the training loop of
`tinylm train` (objective seq_cls: the same AdamW, checkpoints, --resume, metrics.jsonl and model card), then publish
OUT_DIR/hf, which `pipeline("text-classification", model=OUT_DIR/hf)` loads.

Each evaluation measures loss, accuracy and macro-F1 on every validation example: those of --val-data, else
--validation-share of each label of --data, held out (the same examples in every run). Texts are cut at
--context-length tokens. Token classification and question answering fine-tune with transformers' Trainer (see the
fine-tuning tutorial).
"""

from __future__ import annotations

import argparse
from typing import Any

from ..training.objectives.sections import SequenceClassificationSection
from .config_flags import add_config_arguments, add_run_arguments, config_from_args

HELP = "fine-tune a TinyLM folder on labelled texts (text classification)"
TASKS = {"text-classification": SequenceClassificationSection}  # --task -> its objective
FLAGS = {"train_file": "--data", "validation_file": "--val-data"}  # TrainConfig field -> its flag here
OLD_FLAGS = {"validation_file": ("--validation-data",)}  # field -> its former flags, taken for one release
# TrainConfig fields that are not flags here: a language model's data, shape and samples (`tinylm train`'s)
NOT_FLAGS = ("data_dir", "tokenizer_dir", "preset", "model", "objective", "sample_prompt", "sample_tokens")
DEFAULTS: dict[str, Any] = {
    "out_dir": "runs/finetune", "batch_size": 16, "context_length": 128, "max_iters": 100, "warmup_iters": 10,
    "weight_decay": 0.01, "eval_every": 25, "eval_iters": None, "checkpoint_every": 25, "sample_tokens": 0,
}  # a fine-tuning run's defaults, where they differ from a pretraining run's (TrainConfig's)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--task", choices=sorted(TASKS), default="text-classification",
                        help="what to fine-tune for (default: text-classification)")
    add_run_arguments(parser)
    add_config_arguments(parser, objectives=tuple(TASKS.values()), exclude=NOT_FLAGS, flags=FLAGS, defaults=DEFAULTS,
                         old_flags=OLD_FLAGS)


def run(args: argparse.Namespace) -> int:
    from ..training import train
    from .train import finish_run

    return finish_run(train(config_from_args(args, DEFAULTS, objective=TASKS[args.task].name)), args.publish)
