"""`tinylm train`: train on data made by `tinylm prepare`, then publish the run as a Hugging Face folder."""

from __future__ import annotations

import argparse
import dataclasses
import json
import typing

from ..publish import publish_run
from ..training import RunSummary, TrainConfig, train
from ..training.distributed import is_main_process, wait_for_all_ranks
from ..training.config import field_docs, field_sections, read_config_file

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


def _names(text: str) -> list[str]:
    return [name.strip() for name in text.split(",")]


def add_config_arguments(parser: argparse.ArgumentParser, *, skip: tuple[str, ...] = (),
                         flags: dict[str, str] | None = None, defaults: dict[str, typing.Any] | None = None) -> None:
    """One `--flag` per TrainConfig field (dashes for underscores) but those in `skip`, grouped by the config's
    sections; `flags` renames some, `defaults` are the defaults a command's help states (the config's own else).

    Unset flags stay out of the namespace, so a config file's values are not overridden by defaults.
    """
    docs, hints = field_docs(), typing.get_type_hints(TrainConfig)
    fields = {f.name: f for f in dataclasses.fields(TrainConfig)}
    given = {name: f.default for name, f in fields.items() if f.default is not dataclasses.MISSING}
    defaults = {**given, **(defaults or {})}
    for section, names in field_sections().items():
        names = [name for name in names if name not in skip]
        group = parser.add_argument_group(section) if names else None
        for name in names:
            flag, hint = (flags or {}).get(name, "--" + name.replace("_", "-")), hints[name]
            args = typing.get_args(hint)
            base = next((a for a in args if a is not type(None)), hint) if args else hint
            text = f"{docs[name]} (default: {defaults[name]!r})" if name in defaults else docs[name]
            common = {"dest": name, "default": argparse.SUPPRESS, "metavar": flag[2:].replace("-", "_").upper()}
            if name == "model":
                group.add_argument(flag, type=json.loads, help=docs[name] + " (JSON)", **common)
            elif base is bool:
                group.add_argument(flag, type=_parse_bool, nargs="?", const=True, help=docs[name], **common)
            elif typing.get_origin(base) is list:
                group.add_argument(flag, type=_names, help=f"{text} (comma-separated)", **common)
            else:
                group.add_argument(flag, type=_optional(base), help=text, **common)


def config_from_args(args: argparse.Namespace, defaults: dict[str, typing.Any] | None = None) -> TrainConfig:
    """TrainConfig from `defaults`, an optional YAML/JSON file (`--config`) over them, and the flags given on top."""
    overrides = {f.name: getattr(args, f.name) for f in dataclasses.fields(TrainConfig) if hasattr(args, f.name)}
    from_file = read_config_file(args.config) if getattr(args, "config", None) else {}
    return TrainConfig.from_dict({**(defaults or {}), **from_file, **overrides})


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """`--config` and `--publish`: the flags of a training command beside the config's fields."""
    parser.add_argument("--config", default=None, help="YAML or JSON file of TrainConfig fields (flags override it)")
    parser.add_argument("--publish", choices=("last", "best", "none"), default="last",
                        help="weights written to OUT_DIR/hf at the end: the last or the best-validation checkpoint")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_run_arguments(parser)
    add_config_arguments(parser)


def run(args: argparse.Namespace) -> int:
    return finish_run(train(config_from_args(args)), args.publish)


def finish_run(summary: RunSummary, publish: str) -> int:
    """Publish a finished run (`publish`: last, best or none) and print its summary; the command's exit code."""
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
