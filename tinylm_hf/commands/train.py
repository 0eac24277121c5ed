"""`tinylm train`: train on data made by `tinylm prepare`, then publish the run as a Hugging Face folder."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from ..training.objectives.sections import CausalLMSection, MaskedLMSection
from .config_flags import add_config_arguments, add_run_arguments, config_from_args

if TYPE_CHECKING:
    from ..training import RunSummary, TrainConfig

HELP = "train a TinyLM model on data made by `tinylm prepare`"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_run_arguments(parser)
    add_config_arguments(parser, objectives=(CausalLMSection, MaskedLMSection))


def run(args: argparse.Namespace) -> int:
    return train_and_publish(config_from_args(args), args.publish)


def train_and_publish(config: TrainConfig, publish: str) -> int:
    """Run `train(config)`, then `finish_run`; returns the command's exit code."""
    from ..training import train

    return finish_run(train(config), publish)


def finish_run(summary: RunSummary, publish: str) -> int:
    """Publish a finished run (`publish`: last, best or none) and print a few lines about it (every number is in the
    run folder's summary.json); the command's exit code."""
    from ..publish import publish_run
    from ..training.distributed import is_main_process, wait_for_all_ranks

    if is_main_process() and not summary.interrupted and publish != "none":
        print(f"Hugging Face folder: {publish_run(summary, checkpoint=publish)}")
    wait_for_all_ranks()  # under torchrun: no rank leaves while rank 0 still publishes
    if not is_main_process():
        return 0
    if summary.interrupted:
        print(f"interrupted at iteration {summary.iterations}: continue with --resume")
        return 130
    print(summary.describe())
    return 0
