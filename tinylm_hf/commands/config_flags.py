"""One `--flag` per `TrainConfig` field, for the commands that run the training loop (`tinylm train`, `tinylm sft`).

Kept apart from those commands' modules, and light to import: building the parser must not load torch.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import typing
from collections.abc import Collection
from typing import Any

from ..training.config import TrainConfig, field_docs, field_sections


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


def add_config_arguments(parser: argparse.ArgumentParser, *, exclude: Collection[str] = ()) -> None:
    """One `--flag` per TrainConfig field (dashes for underscores) but those in `exclude`, grouped by the
    config's sections.

    Unset flags stay out of the namespace, so a config file's values are not overridden by defaults.
    """
    docs, hints = field_docs(), typing.get_type_hints(TrainConfig)
    fields = {f.name: f for f in dataclasses.fields(TrainConfig)}
    for section, names in field_sections().items():
        group = parser.add_argument_group(section)
        for name in (n for n in names if n not in exclude):
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


def config_from_args(args: argparse.Namespace, **fixed: Any) -> TrainConfig:
    """TrainConfig from an optional YAML/JSON file (`--config`) with the flags that were given on top, and
    `fixed` values (a command's own, such as `objective="sft"`) over both."""
    overrides = {f.name: getattr(args, f.name) for f in dataclasses.fields(TrainConfig) if hasattr(args, f.name)}
    overrides |= fixed
    if getattr(args, "config", None):
        return TrainConfig.from_file(args.config, **overrides)
    return TrainConfig.from_dict(overrides)
