"""One `--flag` per `TrainConfig` field, for the commands that run the training loop (`tinylm train`, `sft`,
`finetune`, `dpo`): the shared fields grouped by the config's sections, each objective's own fields in a group of
their own (its section, `training.objectives.sections`), shown only by the commands that run that objective.

Kept apart from those commands' modules, and light to import: building the parser must not load torch.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import typing
from collections.abc import Collection
from typing import Any

from ..training.config import TrainConfig, field_docs, field_sections, read_config_file
from ..training.objectives.sections import DEFAULT_OBJECTIVE, SECTIONS, ConfigSection, check_fields_of_objective
from .old_flags import add_old_flags


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


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """`--config` and `--publish`: the flags of a training command beside the config's fields."""
    parser.add_argument("--config", default=None, help="YAML or JSON file of TrainConfig fields (flags override it)")
    parser.add_argument("--publish", choices=("last", "best", "none"), default="last",
                        help="weights written to OUT_DIR/hf at the end: the last or the best-validation checkpoint")


def add_config_arguments(parser: argparse.ArgumentParser, *, objectives: Collection[type[ConfigSection]] = (),
                         exclude: Collection[str] = (), flags: dict[str, str] | None = None,
                         defaults: dict[str, Any] | None = None,
                         old_flags: dict[str, tuple[str, ...]] | None = None) -> None:
    """One `--flag` per TrainConfig field (dashes for underscores) but those in `exclude` and those of objectives not
    in `objectives`, grouped by the config's sections (each objective's own fields under its section's title); `flags`
    renames some, `defaults` are the defaults a command's help states (the config's own else), `old_flags` are a
    field's former flags here (taken with a notice, not shown).

    Unset flags stay out of the namespace, so a config file's values are not overridden by defaults.
    """
    docs, hints = field_docs(), typing.get_type_hints(TrainConfig)
    fields = {f.name: f for f in dataclasses.fields(TrainConfig)}
    given = {name: f.default for name, f in fields.items() if f.default is not dataclasses.MISSING}
    defaults = {**given, **(defaults or {})}
    others = {name for section in SECTIONS.values() if section not in objectives for name in section.field_names()}
    for section, names in field_sections().items():
        names = [name for name in names if name not in exclude and name not in others]
        group = parser.add_argument_group(section) if names else None
        for name in names:
            flag = (flags or {}).get(name, _flag(name))
            stated = defaults.get(name) is None and "default" in docs[name].lower()  # the docstring says what it is
            text = f"{docs[name]} (default: {defaults[name]!r})" if name in defaults and not stated else docs[name]
            if name == "model":
                text = docs[name] + " (JSON)"
            elif _base(hints[name]) is bool:
                text = docs[name]
            elif typing.get_origin(_base(hints[name])) is list:
                text += " (comma-separated)"
            if name == "objective":
                text += "; one of " + "; ".join(f"{s.name}: {s.summary}" for s in SECTIONS.values())
            action = _add_field_argument(group, name, flag, hints[name], text.replace("%", "%%"))  # formats with %
            if name in (old_flags or {}):
                add_old_flags(parser, action, *old_flags[name])
    for name in sorted(others):  # parsed, not shown, so that config_from_args names the objective they belong to
        _add_field_argument(parser, name, _flag(name), hints[name], argparse.SUPPRESS)


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _base(hint: Any) -> Any:
    """`X` of `X | None`."""
    args = typing.get_args(hint)
    return next((a for a in args if a is not type(None)), hint) if args else hint


def _add_field_argument(group: Any, name: str, flag: str, hint: Any, text: str) -> argparse.Action:
    """The flag of field `name` (of type `hint`), with help `text`; unset, it stays out of the namespace."""
    base = _base(hint)
    common = {"dest": name, "default": argparse.SUPPRESS, "metavar": flag[2:].replace("-", "_").upper(), "help": text}
    if name == "model":
        return group.add_argument(flag, type=json.loads, **common)
    if base is bool:
        return group.add_argument(flag, type=_parse_bool, nargs="?", const=True, **common)
    if typing.get_origin(base) is list:
        return group.add_argument(flag, type=_names, **common)
    return group.add_argument(flag, type=_optional(base), **common)


def _not_default(values: dict[str, Any]) -> list[str]:
    """The keys of `values` whose value is not their TrainConfig field's default."""
    defaults = {f.name: f.default for f in dataclasses.fields(TrainConfig)}
    return [name for name, value in values.items() if value != defaults.get(name, dataclasses.MISSING)]


def config_from_args(args: argparse.Namespace, defaults: dict[str, Any] | None = None, **fixed: Any) -> TrainConfig:
    """TrainConfig from a command's `defaults`, an optional YAML/JSON file (`--config`) over them, the flags
    given on top, and `fixed` values (a command's own, such as `objective="sft"`) over all."""
    overrides = {f.name: getattr(args, f.name) for f in dataclasses.fields(TrainConfig) if hasattr(args, f.name)}
    from_file = read_config_file(args.config) if getattr(args, "config", None) else {}
    values = {**(defaults or {}), **from_file, **overrides, **fixed}
    objective = values.get("objective", DEFAULT_OBJECTIVE)
    if "objective" in fixed and from_file.get("objective", objective) != objective:
        raise ValueError(f"config file {args.config} sets objective {from_file['objective']!r}, but this command "
                         f"trains objective {objective}: drop the objective line")
    if isinstance(objective, str) and objective in SECTIONS:  # else TrainConfig names the unknown objective
        check_fields_of_objective(objective, overrides, spell=_flag)
        check_fields_of_objective(objective, _not_default(from_file),  # a saved config holds every field
                                  spell=lambda name: f"{name} (in {args.config})")
    return TrainConfig.from_dict(values)
