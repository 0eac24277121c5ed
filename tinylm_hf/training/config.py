"""TrainConfig: every knob of a training run, one documented field each, from YAML/JSON or CLI flags."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class TrainConfig:
    """Settings of one `tinylm train` run. Field docstrings are the `--help` text of the CLI flags."""

    data_dir: str = ""
    """Folder made by `tinylm prepare` holding train.bin/val.bin and their JSON headers."""
    tokenizer_dir: str | None = None
    """Tokenizer folder saved into the final HF folder (default: the one recorded in train.json)."""
    out_dir: str = "runs/train"
    """Output folder: checkpoints/, metrics.jsonl, loss.png and the Hugging Face folder hf/."""

    preset: str | None = None
    """Named TinyLMConfig preset (TinyLMConfig.from_preset); None uses TinyLMConfig's defaults."""
    model: dict[str, Any] = field(default_factory=dict)
    """TinyLMConfig field overrides, e.g. {hidden_size: 128, num_hidden_layers: 2}."""
    init_from: str | None = None
    """Continue from a saved Hugging Face model folder (from_pretrained) instead of random weights."""

    batch_size: int = 32
    """Sequences per optimizer step, summed over gradient-accumulation steps and DDP ranks."""
    context_length: int = 256
    """Tokens per training sequence."""
    grad_accum_steps: int = 1
    """Micro-batches per optimizer step (per-rank micro-batch = batch_size / (grad_accum_steps * world))."""
    max_iters: int = 1000
    """Optimizer steps in the whole run."""

    max_lr: float = 1e-3
    """Peak learning rate, reached at the end of warm-up."""
    min_lr: float = 1e-4
    """Learning rate at the end of the cosine decay and after it."""
    warmup_iters: int = 100
    """Linear warm-up steps from 0 to max_lr."""
    cosine_cycle_iters: int | None = None
    """Step at which the cosine reaches min_lr (default: max_iters)."""
    weight_decay: float = 0.1
    """Decoupled AdamW weight decay (not applied to norms and biases)."""
    beta1: float = 0.9
    """AdamW first-moment decay."""
    beta2: float = 0.95
    """AdamW second-moment decay."""
    eps: float = 1e-8
    """AdamW epsilon."""
    grad_clip: float | None = 1.0
    """Global gradient L2-norm limit; None or 0 turns clipping off."""

    eval_every: int = 100
    """Evaluate on val.bin every this many steps (and at the end); 0 evaluates only at the end."""
    eval_iters: int | None = 20
    """Validation batches per evaluation (None: the whole validation array, once)."""
    eval_batch_size: int | None = None
    """Sequences per validation batch (default: the per-rank micro-batch)."""
    checkpoint_every: int = 100
    """Write a training checkpoint every this many steps (and at the end); 0 only at the end."""
    keep_last: int = 3
    """Training checkpoints kept on disk (older ones are deleted)."""
    hf_export_every: int = 0
    """Also write the Hugging Face folder every this many steps (0: only at the end)."""
    log_every: int = 1
    """Append a metrics.jsonl line every this many steps."""

    device: str = "auto"
    """Torch device: auto (cuda when present, else cpu), cpu, cuda, cuda:N, mps."""
    dtype: str = "auto"
    """Compute dtype: float32, or bfloat16 autocast; auto = bfloat16 on CUDA when supported, else float32."""
    compile: bool = False
    """Wrap the model in torch.compile (worth it on a GPU)."""
    seed: int = 1337
    """Seed for the weights' initialisation and the batch sampler."""
    resume: bool = False
    """Continue from the newest checkpoint in out_dir/checkpoints (exactly, bitwise on CPU)."""
    progress: bool = True
    """Show a tqdm bar with loss, learning rate and tokens/s."""
    plot: bool = True
    """Write loss.png (train and validation loss against tokens) beside metrics.jsonl."""

    def __post_init__(self) -> None:
        positive = ("batch_size", "context_length", "grad_accum_steps", "max_iters", "log_every")
        for name in positive:
            if int(getattr(self, name)) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        for name in ("warmup_iters", "eval_every", "checkpoint_every", "hf_export_every", "keep_last"):
            if int(getattr(self, name)) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.min_lr < 0 or self.max_lr <= 0 or self.min_lr > self.max_lr:
            raise ValueError(f"need 0 <= min_lr <= max_lr and max_lr > 0, got {self.min_lr}, {self.max_lr}")
        if self.dtype not in ("auto", "float32", "bfloat16"):
            raise ValueError(f"dtype must be auto, float32 or bfloat16, got {self.dtype!r}")
        if not isinstance(self.model, dict):
            raise TypeError(f"model must be a mapping of TinyLMConfig overrides, got {type(self.model).__name__}")

    @property
    def cycle_iters(self) -> int:
        """`cosine_cycle_iters`, defaulting to `max_iters`."""
        return self.max_iters if self.cosine_cycle_iters is None else self.cosine_cycle_iters

    def to_dict(self) -> dict[str, Any]:
        """A plain dict (JSON-serialisable) of every field."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> TrainConfig:
        """Build from a mapping; unknown keys are a `ValueError` naming them."""
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - names)
        if unknown:
            raise ValueError(f"unknown TrainConfig field(s): {', '.join(unknown)}")
        return cls(**values)

    @classmethod
    def from_file(cls, path: str | os.PathLike, **overrides: Any) -> TrainConfig:
        """Load a YAML (.yaml/.yml) or JSON file, then apply `overrides`."""
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"config file {path} does not exist")
        text = path.read_text()
        if path.suffix.lower() in (".yaml", ".yml"):
            import yaml

            values = yaml.safe_load(text) or {}
        else:
            values = json.loads(text)
        if not isinstance(values, dict):
            raise ValueError(f"config file {path} must hold a mapping, got {type(values).__name__}")
        return cls.from_dict({**values, **overrides})


def _field_docs() -> dict[str, str]:
    # attribute docstrings are not kept at runtime; read them from this file's source.
    import ast
    import inspect

    tree = ast.parse(inspect.getsource(TrainConfig))
    body = tree.body[0].body  # type: ignore[attr-defined]
    docs: dict[str, str] = {}
    for node, nxt in zip(body, body[1:]):
        if isinstance(node, ast.AnnAssign) and isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant):
            docs[node.target.id] = str(nxt.value.value)  # type: ignore[union-attr]
    return docs


def _parse_bool(text: str) -> bool:
    if text.lower() in ("1", "true", "yes", "on"):
        return True
    if text.lower() in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true/false, got {text!r}")


def _parse_optional(kind: type) -> Any:
    def parse(text: str) -> Any:
        return None if text.lower() in ("none", "null") else kind(text)

    return parse


def add_config_arguments(parser: argparse.ArgumentParser) -> None:
    """One `--flag` per TrainConfig field (dashes for underscores); unset flags stay out of the namespace."""
    docs = _field_docs()
    hints = typing.get_type_hints(TrainConfig)
    for f in dataclasses.fields(TrainConfig):
        flag = "--" + f.name.replace("_", "-")
        hint = hints[f.name]
        args = typing.get_args(hint)
        base = next((a for a in args if a is not type(None)), hint) if args else hint
        if f.name == "model":
            parser.add_argument(flag, type=json.loads, default=argparse.SUPPRESS, help=docs.get(f.name, "") + " (JSON)")
        elif base is bool:
            parser.add_argument(flag, type=_parse_bool, default=argparse.SUPPRESS, nargs="?", const=True,
                                help=docs.get(f.name, ""))
        else:
            parser.add_argument(flag, type=_parse_optional(base), default=argparse.SUPPRESS, help=docs.get(f.name, ""))


def config_from_args(args: argparse.Namespace, config_file: str | None = None) -> TrainConfig:
    """TrainConfig from an optional YAML/JSON file with the flags that were given on top."""
    overrides = {f.name: getattr(args, f.name) for f in dataclasses.fields(TrainConfig) if hasattr(args, f.name)}
    if config_file:
        return TrainConfig.from_file(config_file, **overrides)
    return TrainConfig.from_dict(overrides)
