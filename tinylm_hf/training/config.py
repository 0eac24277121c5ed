"""TrainConfig: every knob of a training run, one documented field each, grouped in sections.

Values come from Python, a YAML/JSON file or `tinylm train` flags (commands/config_flags.py maps one flag
per field, grouped by the `Section` each field declares in its annotation, and each objective's own fields by
their section, `objectives.SECTIONS`). Every field and every conflict between fields is checked when the
config is made, before any data is read or model built.
"""

from __future__ import annotations

import ast
import dataclasses
import difflib
import inspect
import json
import math
import os
import re
import textwrap
import types
import typing
from collections.abc import Collection
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any

from .objectives.sections import (
    DEFAULT_OBJECTIVE,
    FIELD_SECTIONS,
    MASKING_STRATEGIES,
    SECTIONS,
    check_fields_of_objective,
    objective_section,
)

REPORT_TARGETS = ("none", "tensorboard", "trackio", "wandb")
DTYPES = ("auto", "float32", "bfloat16")
BUDGET_CLOCKS = ("wall", "process")
OBJECTIVES = tuple(SECTIONS)  # the names TrainConfig.objective takes
MAX_SEED = 2**63 - 1  # torch.manual_seed and numpy's generators take every seed from 0 to this
OPTIMIZERS = ("adamw", "muon")
DEFAULT_MAX_LR = {"adamw": 1e-3, "muon": 6e-3}  # max_lr unless given: with muon, of the AdamW part beside Muon's matrices
MIN_LR_SHARE = 0.1  # min_lr unless given: this share of max_lr
MAX_CONFIG_BYTES = 1 << 20  # a --config file is a few hundred bytes; a megabyte is no config


@dataclass(frozen=True)
class Section:
    """The group of a TrainConfig field in `--help` (`field_sections`), declared on the field:
    `batch_size: Annotated[int, OPTIMISATION] = 32`. Each objective's own fields have their section's instead."""

    title: str


DATA = Section("data")
MODEL = Section("model")
OBJECTIVE = Section("objective")
OPTIMISATION = Section("optimisation")
EVALUATION = Section("evaluation and checkpoints")
SYSTEM = Section("system")


@dataclass
class TrainConfig(*FIELD_SECTIONS):  # type: ignore[misc]
    """Settings of one `tinylm train` run. Field docstrings are the `--help` text of the CLI flags.

    Each objective's own fields come from its section (`objectives.sections`), inherited flat: `config.masking`,
    `TrainConfig(conversations=...)`. Every other field declares its `--help` group: `Annotated[type, DATA]`.
    """

    data_dir: Annotated[str, DATA] = ""
    """Folder made by `tinylm prepare` holding train.bin/val.bin and their JSON headers."""
    tokenizer_dir: Annotated[str | None, DATA] = None
    """Tokenizer folder published with the model (default: the one recorded in train.json)."""
    out_dir: Annotated[str, DATA] = "runs/train"
    """Output folder: checkpoints/, metrics.jsonl, loss.png, run.json (and hf/ once published)."""

    preset: Annotated[str | None, MODEL] = None
    """Named TinyLMConfig preset (TinyLMConfig.from_preset); None uses TinyLMConfig's defaults."""
    model: Annotated[dict[str, Any], MODEL] = field(default_factory=dict)
    """TinyLMConfig field overrides, e.g. {"hidden_size": 128, "num_hidden_layers": 2}."""
    init_from: Annotated[str | None, MODEL] = None
    """Start from a saved Hugging Face model folder (from_pretrained) instead of random weights."""

    objective: Annotated[str, OBJECTIVE] = DEFAULT_OBJECTIVE
    """What the run learns, by the objective's name (`objectives.SECTIONS`: each one's own fields follow in their
    section)."""

    optimizer: Annotated[str, OPTIMISATION] = "adamw"
    """adamw: AdamW for every weight; muon: Muon for the 2-D weights inside the blocks (at muon_lr), AdamW for the
    embeddings, the head and the norms (at max_lr), as the GPT-2 speedrun records train."""
    batch_size: Annotated[int, OPTIMISATION] = 32
    """Sequences per optimizer step, summed over gradient-accumulation steps and DDP ranks."""
    context_length: Annotated[int, OPTIMISATION] = 256
    """Tokens per training sequence (seq_cls: the most tokens of a text kept; longer texts are cut)."""
    grad_accum_steps: Annotated[int, OPTIMISATION] = 1
    """Micro-batches per optimizer step (per-rank micro-batch = batch_size / (grad_accum_steps * world))."""
    max_iters: Annotated[int, OPTIMISATION] = 1000
    """Optimizer steps in the whole run (the cosine schedule's horizon)."""
    time_budget_s: Annotated[float | None, OPTIMISATION] = None
    """Seconds of training (None: no limit): after the warm-up the learning rate follows the share of the budget
    used, so the cosine ends at min_lr when the budget does, and the run stops then (or at max_iters). The first step
    (warm-up, and compilation under `compile`) is not counted."""
    time_budget_clock: Annotated[str, OPTIMISATION] = "wall"
    """The clock `time_budget_s` is counted on: "wall" (elapsed time) or "process" (this process's CPU time,
    which other programs on a busy machine do not use up; with one thread it counts the compute a step takes)."""
    max_lr: Annotated[float | None, OPTIMISATION] = None
    """Peak learning rate, reached at the end of warm-up: of every weight (adamw), or of the AdamW part (muon: the
    embeddings, the head and the norms). Default: 1e-3 with adamw; 6e-3 with muon, whose AdamW part at 1e-3 held the
    model back while Muon trained the matrices (scripts/compare_optimizers.py, docs/benchmarks/training.md)."""
    min_lr: Annotated[float | None, OPTIMISATION] = None
    """Learning rate at the end of the cosine decay and after it (default: a tenth of max_lr)."""
    warmup_iters: Annotated[int, OPTIMISATION] = 100
    """Linear warm-up steps from 0 to max_lr (at most max_iters)."""
    cosine_cycle_iters: Annotated[int | None, OPTIMISATION] = None
    """Step at which the cosine reaches min_lr (default: max_iters)."""
    muon_lr: Annotated[float, OPTIMISATION] = 0.02
    """Peak learning rate of the Muon part (optimizer muon); it follows max_lr's schedule (warm-up, cosine down to
    min_lr / max_lr of it)."""
    muon_momentum: Annotated[float, OPTIMISATION] = 0.95
    """Muon's momentum (Nesterov), in [0, 1)."""
    weight_decay: Annotated[float, OPTIMISATION] = 0.1
    """Decoupled weight decay of the matrices, AdamW's and Muon's (not applied to norms and biases)."""
    beta1: Annotated[float, OPTIMISATION] = 0.9
    """AdamW first-moment decay."""
    beta2: Annotated[float, OPTIMISATION] = 0.95
    """AdamW second-moment decay."""
    eps: Annotated[float, OPTIMISATION] = 1e-8
    """AdamW epsilon."""
    grad_clip: Annotated[float | None, OPTIMISATION] = 1.0
    """Global gradient L2-norm limit; None or 0 turns clipping off."""

    eval_every: Annotated[int, EVALUATION] = 100
    """Evaluate on val.bin every this many steps (and at the end); 0 evaluates only at the end."""
    eval_iters: Annotated[int | None, EVALUATION] = 20
    """Validation batches per evaluation, at least 1 (None: the whole validation array, once). seq_cls scores
    every validation example at every evaluation."""
    eval_batch_size: Annotated[int | None, EVALUATION] = None
    """Sequences per validation batch (default: the per-rank micro-batch)."""
    sample_prompt: Annotated[str | None, EVALUATION] = None
    """Fixed prompt sampled from at each evaluation (plain text; shown in the log and metrics.jsonl). Default: the
    opening words of the validation text (sft: a greeting sent as the user's message)."""
    sample_tokens: Annotated[int, EVALUATION] = 24
    """Tokens sampled greedily from sample_prompt at each evaluation (0: no samples)."""
    checkpoint_every: Annotated[int, EVALUATION] = 100
    """Write a training checkpoint every this many steps (and at the end); 0 only at the end."""
    keep_last: Annotated[int, EVALUATION] = 3
    """Newest training checkpoints kept on disk (older ones are deleted; the best is kept apart)."""
    keep_best: Annotated[bool, EVALUATION] = True
    """Also keep the checkpoint with the lowest validation loss (checkpoints/best.pt)."""
    log_every: Annotated[int, EVALUATION] = 1
    """Append a metrics.jsonl line every this many steps."""

    device: Annotated[str, SYSTEM] = "auto"
    """Torch device: auto (cuda when present, else cpu), cpu, cuda, cuda:N, mps."""
    dtype: Annotated[str, SYSTEM] = "auto"
    """Compute dtype: float32, or bfloat16 autocast; auto = bfloat16 on CUDA when supported, else float32."""
    compile: Annotated[bool, SYSTEM] = False
    """Wrap the model in torch.compile (worth it on a GPU)."""
    threads: Annotated[int | None, SYSTEM] = None
    """CPU threads for torch (default: the machine's physical cores)."""
    seed: Annotated[int, SYSTEM] = 1337
    """Seed for the weights' initialisation and the batch sampler."""
    resume: Annotated[bool, SYSTEM] = False
    """Continue this out_dir's run from its newest intact checkpoint (exactly, bitwise on CPU)."""
    overwrite: Annotated[bool, SYSTEM] = False
    """Start afresh in a used out_dir, deleting the previous run's checkpoints, metrics and hf/."""
    progress: Annotated[bool, SYSTEM] = True
    """Show a progress bar on a terminal (plain log lines otherwise)."""
    plot: Annotated[bool, SYSTEM] = True
    """Write loss.png (train and validation loss against tokens) beside metrics.jsonl."""
    report_to: Annotated[str, SYSTEM] = "none"
    """Experiment tracker for the metrics: none, tensorboard, trackio or wandb (that library must be installed)."""

    def __post_init__(self) -> None:
        check_field_types(self)
        if self.max_lr is None:
            self.max_lr = DEFAULT_MAX_LR.get(self.optimizer, DEFAULT_MAX_LR["adamw"])  # a bad optimizer is named below
        if self.min_lr is None:
            self.min_lr = MIN_LR_SHARE * self.max_lr
        for name in ("batch_size", "context_length", "grad_accum_steps", "max_iters", "log_every"):
            _check_int(self, name, minimum=1)
        for name in ("warmup_iters", "eval_every", "checkpoint_every", "keep_last", "sample_tokens"):
            _check_int(self, name, minimum=0)
        check_seed(self.seed)
        for name in ("eval_iters", "eval_batch_size", "cosine_cycle_iters", "threads"):
            if getattr(self, name) is not None:
                _check_int(self, name, minimum=1)
        for name in ("max_lr", "min_lr", "weight_decay", "eps", "beta1", "beta2", "muon_lr", "muon_momentum"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
                raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
        if self.max_lr <= 0 or self.min_lr > self.max_lr:
            raise ValueError(f"need 0 <= min_lr <= max_lr and max_lr > 0, got min_lr={self.min_lr}, "
                             f"max_lr={self.max_lr}: the cosine decays from --max-lr to --min-lr (default 1e-4); "
                             "pass a lower --min-lr")
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer must be one of {', '.join(OPTIMIZERS)}, got {self.optimizer!r}")
        if self.muon_lr <= 0 or self.muon_momentum >= 1:
            raise ValueError(f"need muon_lr > 0 and 0 <= muon_momentum < 1, got muon_lr={self.muon_lr}, "
                             f"muon_momentum={self.muon_momentum}")
        if not (0 <= self.beta1 < 1 and 0 <= self.beta2 < 1):
            raise ValueError(f"beta1 and beta2 must be in [0, 1), got {self.beta1}, {self.beta2}")
        if self.grad_clip is not None and (not math.isfinite(self.grad_clip) or self.grad_clip < 0):
            raise ValueError(f"grad_clip must be a finite number >= 0 or None, got {self.grad_clip!r}")
        if self.time_budget_s is not None and (not math.isfinite(self.time_budget_s) or self.time_budget_s <= 0):
            raise ValueError(f"time_budget_s must be a positive number of seconds, got {self.time_budget_s!r}")
        if self.time_budget_clock not in BUDGET_CLOCKS:
            raise ValueError(f"time_budget_clock must be one of {', '.join(BUDGET_CLOCKS)}, "
                             f"got {self.time_budget_clock!r}")
        if self.warmup_iters > self.max_iters:
            raise ValueError(
                f"warmup_iters ({self.warmup_iters}) is larger than max_iters ({self.max_iters}): the learning "
                "rate would never reach max_lr; lower --warmup-iters or raise --max-iters"
            )
        if self.cosine_cycle_iters is not None and self.cosine_cycle_iters < self.warmup_iters:
            raise ValueError(
                f"cosine_cycle_iters ({self.cosine_cycle_iters}) is smaller than warmup_iters ({self.warmup_iters}): "
                "the cosine would end before the warm-up does; raise --cosine-cycle-iters or lower --warmup-iters"
            )
        if self.batch_size % self.grad_accum_steps:
            raise ValueError(f"batch_size {self.batch_size} must be divisible by grad_accum_steps {self.grad_accum_steps}")
        if self.dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, got {self.dtype!r}")
        if self.report_to not in REPORT_TARGETS:
            raise ValueError(f"report_to must be one of {', '.join(REPORT_TARGETS)}, got {self.report_to!r}")
        self._validate_model()
        if self.resume and self.overwrite:
            raise ValueError("resume and overwrite contradict each other: pass one of them")
        chosen = objective_section(self.objective)
        for section in SECTIONS.values():
            section.check_values(self)
        check_fields_of_objective(self.objective, self.changed_section_fields())
        chosen.check_run(self)

    def changed_section_fields(self) -> list[str]:
        """The objectives' own fields whose values differ from their defaults (those a run was given)."""
        return [f.name for section in FIELD_SECTIONS for f in dataclasses.fields(section)
                if getattr(self, f.name) != f.default]

    def _validate_model(self) -> None:
        """The model overrides (`--model`) and preset: known fields of the right types, position tables of a sane size;
        neither with `init_from`, whose folder fixes the model's shape."""
        if self.init_from and (self.model or self.preset):
            given = "--model" if self.model else "--preset"
            raise ValueError(f"{given} shapes a new model, but init_from loads {self.init_from} whose shape is fixed: "
                             f"drop {given}, or drop --init-from to train a new model")
        if not self.init_from:
            from ..modeling.configuration_tinylm import check_overrides

            check_overrides(self.model, preset=self.preset, context_length=self.context_length)

    def schedule_note(self) -> str | None:
        """A line for people when the schedule cannot decay (`min_lr` equals `max_lr`: the rate stays at `max_lr`
        after the warm-up); None otherwise. Allowed (a constant rate is a choice), but never silent."""
        if self.min_lr != self.max_lr:
            return None
        return (f"note: min_lr equals max_lr ({self.max_lr}): the learning rate stays constant after the warm-up; "
                "pass a lower --min-lr for a cosine decay")

    @property
    def cycle_iters(self) -> int:
        """`cosine_cycle_iters`, defaulting to `max_iters`."""
        return self.max_iters if self.cosine_cycle_iters is None else self.cosine_cycle_iters

    def to_dict(self) -> dict[str, Any]:
        """A plain dict (JSON-serialisable) of every field."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> TrainConfig:
        """Build from a mapping; an unknown key is a `ValueError` naming it and the nearest field."""
        names = [f.name for f in dataclasses.fields(cls)]
        for key in values:
            if key not in names:
                close = difflib.get_close_matches(str(key), names, n=1)
                hint = f"did you mean {close[0]!r}?" if close else f"the fields are {', '.join(names)}"
                raise ValueError(f"unknown TrainConfig field {key!r}; {hint}")
        return cls(**values)

    @classmethod
    def from_file(cls, path: str | os.PathLike, **overrides: Any) -> TrainConfig:
        """Load a YAML (.yaml/.yml) or JSON file, then apply `overrides`."""
        return cls.from_dict({**read_config_file(path), **overrides})


def read_config_file(path: str | os.PathLike) -> dict[str, Any]:
    """The mapping of TrainConfig fields in a YAML (.yaml/.yml) or JSON file."""
    from ..fileio import check_input_file

    path = check_input_file(path, "config file")
    if path.stat().st_size > MAX_CONFIG_BYTES:
        raise ValueError(f"config file {path} has {path.stat().st_size:,} bytes; a config is at most "
                         f"{MAX_CONFIG_BYTES:,}: is it the right file?")
    try:
        text = path.read_text(encoding="utf-8")
        if path.suffix.lower() in (".yaml", ".yml"):
            values = load_yaml_without_aliases(text) or {}
        else:
            values = json.loads(text)
    except Exception as err:  # UnicodeDecodeError, yaml.YAMLError, json.JSONDecodeError, RecursionError
        raise ValueError(f"config file {path} does not parse: {err}") from None
    if not isinstance(values, dict):
        raise ValueError(f"config file {path} must hold a mapping, got {type(values).__name__}")
    return values


def load_yaml_without_aliases(text: str) -> Any:
    """`yaml.safe_load` that refuses aliases (`*name`), and reads `3e-4` as a number (as YAML 1.2 and JSON do;
    PyYAML's YAML 1.1 reads it as a string). Aliases are refused because a few lines of nested ones expand to
    billions of values (a "billion laughs" bomb), and a config file needs none."""
    import yaml

    return yaml.load(text, Loader=_config_loader())  # noqa: S506 (a SafeLoader)


@lru_cache(maxsize=1)
def _config_loader() -> type:
    import yaml

    class ConfigLoader(yaml.SafeLoader):
        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.check_event(yaml.AliasEvent):
                event, mark = self.peek_event(), self.peek_event().start_mark
                raise yaml.YAMLError(f"YAML alias *{event.anchor} at line {mark.line + 1}, column {mark.column + 1}: "
                                     "aliases are not allowed in a config file; write the values out")
            return super().compose_node(parent, index)

    ConfigLoader.add_implicit_resolver(
        "tag:yaml.org,2002:float", re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
        list("-+0123456789"))
    return ConfigLoader


def check_field_types(config: TrainConfig) -> None:
    """Raise TypeError naming the first field whose value is not of its annotated type (ValueError for NaN or infinity).

    Strict, as JSON and YAML types are: a bool field takes only true/false (the string "no" is refused, not read
    as true), an int field no float or bool, a float field any finite int or float (never NaN or infinity).
    """
    for name, hint in _field_types().items():
        value = getattr(config, name)
        kinds = typing.get_args(hint) if typing.get_origin(hint) in (typing.Union, types.UnionType) else (hint,)
        if value is None and type(None) in kinds:
            continue
        if not any(_is_of(value, kind) for kind in kinds if kind is not type(None)):
            raise TypeError(f"{name} must be {_describe(hint)}, got {type(value).__name__} {value!r}"
                            + (" (write true or false, without quotes)" if bool in kinds else ""))
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"{name} must be a finite number, got {value!r}")


def _is_of(value: Any, kind: Any) -> bool:
    origin = typing.get_origin(kind)
    if origin is list:
        return isinstance(value, list) and all(_is_of(v, typing.get_args(kind)[0]) for v in value)
    if origin is dict:
        return isinstance(value, dict) and all(isinstance(k, str) for k in value)
    if kind is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, kind)


def _describe(hint: Any) -> str:
    kinds = typing.get_args(hint) if typing.get_origin(hint) in (typing.Union, types.UnionType) else (hint,)
    words = {bool: "true or false", int: "an integer", float: "a number", str: "a string", type(None): "null"}
    return " or ".join(words.get(k, "a list of strings" if typing.get_origin(k) is list else "a mapping")
                       for k in kinds)


@lru_cache(maxsize=1)
def _field_types() -> dict[str, Any]:
    return typing.get_type_hints(TrainConfig)


def check_context_length(context_length: int, max_position_embeddings: int) -> None:
    """A run's sequences must fit the model's positions."""
    if max_position_embeddings < context_length:
        raise ValueError(
            f"context_length {context_length} exceeds the model's max_position_embeddings "
            f"{max_position_embeddings}; lower --context-length or raise max_position_embeddings"
        )


def check_seed(seed: int, name: str = "seed") -> int:
    """`seed` if it is a whole number from 0 to `MAX_SEED` (what every generator we seed takes); else a ValueError."""
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED:
        raise ValueError(f"{name} must be a whole number from 0 to 2**63 - 1 ({MAX_SEED}), got {seed!r}")
    return seed


def _check_int(config: TrainConfig, name: str, *, minimum: int) -> None:
    value = getattr(config, name)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")


@lru_cache(maxsize=1)
def field_docs() -> dict[str, str]:
    """Each field's docstring (attribute docstrings are not kept at run time: read from the source of TrainConfig and
    of the objectives' field sections)."""
    docs: dict[str, str] = {}
    for cls in (*FIELD_SECTIONS, TrainConfig):
        body = ast.parse(textwrap.dedent(inspect.getsource(cls))).body[0].body  # type: ignore[attr-defined]
        docs |= {
            node.target.id: str(nxt.value.value)  # type: ignore[union-attr]
            for node, nxt in zip(body, body[1:])
            if isinstance(node, ast.AnnAssign) and isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant)
        }
    return docs


@lru_cache(maxsize=1)
def field_sections() -> dict[str, list[str]]:
    """Section title -> field names, in the order of TrainConfig's fields: each field's `Section` (declared in its
    annotation), each objective's own section (its title, `objectives.sections`) following the `objective` field."""
    own = {name for section in SECTIONS.values() for name in section.field_names()}
    sections: dict[str, list[str]] = {}
    for name, section in declared_sections(TrainConfig, skip=own).items():
        sections.setdefault(section.title, []).append(name)
        if name == "objective":
            sections |= {s.title: list(s.field_names()) for s in SECTIONS.values() if s.field_names()}
    return sections


def declared_sections(config_class: type, *, skip: Collection[str] = ()) -> dict[str, Section]:
    """Field name -> the `Section` its annotation declares, in field order (fields in `skip` left out); a field that
    declares none, or more than one, is a TypeError naming it."""
    hints = typing.get_type_hints(config_class, include_extras=True)
    found: dict[str, Section] = {}
    for f in dataclasses.fields(config_class):
        if f.name in skip:
            continue
        declared = [m for m in getattr(hints[f.name], "__metadata__", ()) if isinstance(m, Section)]
        if len(declared) != 1:
            raise TypeError(f"{config_class.__name__}.{f.name} must declare one section, as "
                            f"`{f.name}: Annotated[type, SYSTEM] = ...` (config.Section), not {len(declared)}")
        found[f.name] = declared[0]
    return found
