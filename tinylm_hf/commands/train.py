"""`tinylm train`: train on data made by `tinylm prepare`, then publish the run as a Hugging Face folder."""

from __future__ import annotations

import argparse
import dataclasses
import json
import typing

from ..publish import publish_run
from ..training import TrainConfig, train
from ..training.distributed import is_main_process, wait_for_all_ranks
from ..training.config import field_docs, field_sections

HELP = "train a TinyLM model on data made by `tinylm prepare`"


def _parse_bool(text: str) -> bool:
    if text.lower() in ("1", "true", "yes", "on"):
        return True
    if text.lower() in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true/false, got {text!r}")


def _optional(kind: type) -> typing.Callable[[str], typing.Any]:
    def parse(text: str) -> typing.Any:
        return None if text.lower() in ("none", "null") else kind(text)

    parse.__name__ = kind.__name__  # argparse names the type in its error messages
    return parse


def add_config_arguments(parser: argparse.ArgumentParser) -> None:
    """One `--flag` per TrainConfig field (dashes for underscores), grouped by the config's sections.

    Unset flags stay out of the namespace, so a config file's values are not overridden by defaults.
    """
    docs, hints = field_docs(), typing.get_type_hints(TrainConfig)
    fields = {f.name: f for f in dataclasses.fields(TrainConfig)}
    for section, names in field_sections().items():
        group = parser.add_argument_group(section)
        for name in names:
            flag, hint = "--" + name.replace("_", "-"), hints[name]
            args = typing.get_args(hint)
            base = next((a for a in args if a is not type(None)), hint) if args else hint
            if name == "model":
                group.add_argument(flag, type=json.loads, default=argparse.SUPPRESS, help=docs[name] + " (JSON)")
            elif base is bool:
                group.add_argument(flag, type=_parse_bool, nargs="?", const=True, default=argparse.SUPPRESS,
                                   help=docs[name])
            else:
                group.add_argument(flag, type=_optional(base), default=argparse.SUPPRESS,
                                   help=f"{docs[name]} (default: {fields[name].default!r})"
                                   if fields[name].default is not dataclasses.MISSING else docs[name])


def config_from_args(args: argparse.Namespace) -> TrainConfig:
    """TrainConfig from an optional YAML/JSON file (`--config`) with the flags that were given on top."""
    overrides = {f.name: getattr(args, f.name) for f in dataclasses.fields(TrainConfig) if hasattr(args, f.name)}
    if getattr(args, "config", None):
        return TrainConfig.from_file(args.config, **overrides)
    return TrainConfig.from_dict(overrides)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", default=None, help="YAML or JSON file of TrainConfig fields (flags override it)")
    parser.add_argument("--publish", choices=("last", "best", "none"), default="last",
                        help="weights written to OUT_DIR/hf at the end: the last or the best-validation checkpoint")
    add_config_arguments(parser)


def run(args: argparse.Namespace) -> int:
    config = config_from_args(args)
    summary = train(config)
    if is_main_process() and not summary.interrupted and args.publish != "none":
        print(f"Hugging Face folder: {publish_run(summary, checkpoint=args.publish)}")
    wait_for_all_ranks()  # under torchrun: no rank leaves while rank 0 still publishes
    if not is_main_process():
        return 0
    if summary.interrupted:
        print(f"interrupted at iteration {summary.iterations}: continue with --resume")
        return 130
    print(json.dumps({k: v for k, v in summary.to_dict().items() if k not in ("train_config",)}, indent=2))
    return 0
