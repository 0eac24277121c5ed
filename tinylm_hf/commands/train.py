"""`tinylm train`: train on data made by `tinylm prepare`, then publish the run as a Hugging Face folder."""

from __future__ import annotations

import argparse
import json

from ..publish import publish_run
from ..training import TrainConfig, train
from ..training.distributed import is_main_process, wait_for_all_ranks
from .config_flags import add_config_arguments, config_from_args

HELP = "train a TinyLM model on data made by `tinylm prepare`"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", default=None, help="YAML or JSON file of TrainConfig fields (flags override it)")
    parser.add_argument("--publish", choices=("last", "best", "none"), default="last",
                        help="weights written to OUT_DIR/hf at the end: the last or the best-validation checkpoint")
    add_config_arguments(parser)


def run(args: argparse.Namespace) -> int:
    return train_and_publish(config_from_args(args), args.publish)


def train_and_publish(config: TrainConfig, publish: str) -> int:
    """Run `train(config)`, write the Hugging Face folder from the `publish` checkpoint ("last", "best" or "none"),
    print the summary; returns the exit code."""
    summary = train(config)
    if is_main_process() and not summary.interrupted and publish != "none":
        print(f"Hugging Face folder: {publish_run(summary, checkpoint=publish)}")
    wait_for_all_ranks()  # under torchrun: no rank leaves while rank 0 still publishes
    if not is_main_process():
        return 0
    if summary.interrupted:
        print(f"interrupted at iteration {summary.iterations}: continue with --resume")
        return 130
    print(json.dumps({k: v for k, v in summary.to_dict().items() if k not in ("train_config",)}, indent=2))
    return 0
