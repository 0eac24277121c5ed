"""RunSummary: the typed record a training run hands to the next stage (publishing, the quickstart, the CLI)."""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...fileio import write_json_atomic
from ..objectives.sections import DEFAULT_OBJECTIVE

SUMMARY_FILE = "summary.json"


@dataclass
class DataProvenance:
    """Where the training text came from, as recorded by `tinylm prepare` (file names, never paths)."""

    input_files: list[str] = field(default_factory=list)
    """Training text files (base names)."""
    val_files: list[str] = field(default_factory=list)
    """Validation text files (base names); empty when validation was carved off the training text."""
    dataset: str | None = None
    """A `datasets` name, when the text came from one."""
    split: str | None = None
    """The dataset split used."""
    train_tokens: int = 0
    """Tokens in train.bin."""
    val_tokens: int = 0
    """Tokens in val.bin."""
    documents: int = 0
    """Training documents."""
    tokenizer_dir: str | None = None
    """The tokenizer folder that made the data."""
    tokenizer_fingerprint: str | None = None
    """`tokenizer_fingerprint` of that tokenizer."""
    val_carved: float | None = None
    """The share of the training text held out for validation, when there were no validation files."""
    token_digest: str | None = None
    """Digests of the training and validation tokens (`token_files.token_digest`, joined by "+"): what a resumed
    run knows its data by, whatever the files are called."""

    @classmethod
    def from_headers(cls, train: dict[str, Any], val: dict[str, Any]) -> DataProvenance:
        """Build from the JSON headers of train.bin and val.bin."""
        source = train.get("source") or {}
        return cls(
            input_files=[os.path.basename(str(f)) for f in source.get("input_files", [])],
            val_files=[os.path.basename(str(f)) for f in source.get("val_files", [])],
            dataset=source.get("dataset"), split=source.get("split"),
            train_tokens=int(train.get("count", 0)), val_tokens=int(val.get("count", 0)),
            documents=int(train.get("documents", 0)), tokenizer_dir=train.get("tokenizer"),
            tokenizer_fingerprint=train.get("tokenizer_fingerprint"), val_carved=source.get("val_carved"),
            token_digest=_joined(train.get("token_digest"), val.get("token_digest")),
        )

    @property
    def name(self) -> str:
        """A human name for the data: the dataset, else the file names, else "unknown"."""
        if self.dataset:
            return self.dataset + (f" ({self.split})" if self.split else "")
        return ", ".join(self.input_files) or "unknown"

    @property
    def validation_name(self) -> str:
        """A human name for the validation text: its files, else the part of the training text held out."""
        if self.val_files:
            return ", ".join(self.val_files)
        share = f"{self.val_carved:.0%} of " if self.val_carved else "a part of "
        return f"{share}{self.name} held out from training" if self.name != "unknown" else "unknown"


def _joined(*digests: str | None) -> str | None:
    return "+".join(digests) if all(isinstance(d, str) for d in digests) else None  # type: ignore[arg-type]


@dataclass
class ClassificationTask:
    """What a text-classification run (objective seq_cls) learnt from and was measured on (names, never paths)."""

    labels: list[str]
    """Label names by id (the model's id2label)."""
    text_column: str
    """The column holding the texts."""
    label_column: str
    """The column holding the labels."""
    train_examples: int
    """Examples trained on."""
    validation_examples: int
    """Examples every evaluation scores (all of the validation split)."""
    validation: str
    """Where the validation examples come from: a file name, or the share of the training file held out."""
    majority_accuracy: float
    """Validation accuracy of always answering the training set's most common label (the baseline to beat)."""
    base_model: str
    """The folder the run fine-tuned (its name; a run's name for the run's hf/ folder)."""


def learning_rate_facts(records: list[dict[str, Any]]) -> dict[str, Any]:
    """`warmup_iters`, `peak_lr` and `final_lr` of a run from its step records (`iter` 1-based, `lr` of that step):
    the warm-up is the steps before the first one at the peak."""
    steps = sorted((r["iter"], r["lr"]) for r in records if "lr" in r and "iter" in r)
    if not steps:
        return {}
    peak = max(lr for _, lr in steps)
    first_at_peak = next(it for it, lr in steps if lr >= peak)
    return {"warmup_iters": first_at_peak - 1, "peak_lr": peak, "final_lr": steps[-1][1]}


@dataclass
class RunSummary:
    """What `train` did: progress, final metrics (metrics.jsonl's names), where its outputs are."""

    run_id: str
    """Identifies the run; every checkpoint of it carries this id."""
    out_dir: str
    """The run's output folder."""
    iterations: int
    """Optimizer steps done."""
    tokens: int
    """Training tokens seen."""
    context_length: int
    """Tokens per training sequence."""
    batch_size: int
    """Sequences per optimizer step."""
    loss: float | None
    """Training loss of the last step."""
    val_loss: float | None = None
    """Validation loss (nats/token) of the last evaluation."""
    val_perplexity: float | None = None
    """exp(val_loss)."""
    val_bpb: float | None = None
    """Validation bits per UTF-8 byte (causal objective only)."""
    val_accuracy: float | None = None
    """Accuracy of the last evaluation: of the masked tokens (mlm; val_loss is then the masked-token loss) or of
    the labels (seq_cls)."""
    val_macro_f1: float | None = None
    """Macro-F1 of the last evaluation (seq_cls): the unweighted mean of each label's F1."""
    val_metrics: dict[str, float] = field(default_factory=dict)
    """The last evaluation's other numbers, by their metrics.jsonl names: an objective's own (dpo's
    `val_reward_accuracy`, `val_reward_margin`, ...), those without a field of their own above."""
    best_val_loss: float | None = None
    """Lowest validation loss of the run."""
    checkpoint: str | None = None
    """The newest checkpoint (the final weights)."""
    best_checkpoint: str | None = None
    """The checkpoint with the lowest validation loss."""
    interrupted: bool = False
    """True when Ctrl-C stopped the run (continue it with --resume). A run that its time budget ended is
    complete, not interrupted."""
    elapsed_s: float = 0.0
    """Wall-clock seconds of this process's training."""
    world_size: int = 1
    """Data-parallel processes."""
    data: DataProvenance = field(default_factory=DataProvenance)
    """The training data."""
    train_config: dict[str, Any] = field(default_factory=dict)
    """TrainConfig.to_dict() of the run."""
    objective: str = DEFAULT_OBJECTIVE
    """The run's objective, by name (`TrainConfig.objective`; `training.objectives` says what each one is)."""
    masking: str | None = None
    """The masking strategy of an mlm run (static, dynamic, whole_word, ngram, span)."""
    task: ClassificationTask | None = None
    """The labels, data and baseline of a seq_cls run."""
    warmup_iters: int | None = None
    """Steps the learning rate rose for, read from the rates the steps used (a time budget re-plans the warm-up the
    config asked for)."""
    peak_lr: float | None = None
    """The highest learning rate a step used."""
    final_lr: float | None = None
    """The learning rate of the last step."""
    setting_changes: list[str] = field(default_factory=list)
    """Settings a `--resume` changed, where it changed them (`at step 4 weight_decay 0.1 -> 0.05`): train_config holds
    the values of the last part of the run only."""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict."""
        return dataclasses.asdict(self)

    def describe(self) -> str:
        """Three lines for a person at the end of a run: its length, the last evaluation's numbers, and where the run
        folder is (its summary.json holds every number).

        >>> print(RunSummary("r", "runs/x", 20, 40960, 128, 16, 4.2, val_loss=4.1, best_val_loss=4.1, val_bpb=1.65,
        ...                  elapsed_s=35.2).describe())
        20 steps (40,960 tokens) in 35 s
        validation: loss 4.1000, 1.650 bits per byte
        run folder: runs/x (every number in runs/x/summary.json)
        """
        scores = [] if self.val_loss is None else [f"loss {self.val_loss:.4f}"]
        if self.best_val_loss is not None and self.val_loss is not None and self.best_val_loss < self.val_loss:
            scores[0] += f" (best {self.best_val_loss:.4f})"
        if self.val_bpb is not None:
            scores.append(f"{self.val_bpb:.3f} bits per byte")
        if self.val_accuracy is not None:
            baseline = (f" on {self.task.validation_examples} examples (majority-class baseline "
                        f"{self.task.majority_accuracy:.3f})") if self.task else ""
            scores.append(f"accuracy {self.val_accuracy:.3f}{baseline}")
        if self.val_macro_f1 is not None:
            scores.append(f"macro-F1 {self.val_macro_f1:.3f}")
        scores += [f"{name.removeprefix('val_')} {value:.4g}" for name, value in self.val_metrics.items()]
        summary = Path(self.out_dir) / SUMMARY_FILE
        return "\n".join([f"{self.iterations:,} steps ({self.tokens:,} tokens) in {self.elapsed_s:,.0f} s",
                          f"validation: {', '.join(scores) or 'none (no evaluation ran)'}",
                          f"run folder: {self.out_dir} (every number in {summary})"])

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> RunSummary:
        """Inverse of `to_dict`."""
        values = dict(values)
        values["data"] = DataProvenance(**values.get("data", {}))
        if values.get("task") is not None:
            values["task"] = ClassificationTask(**values["task"])
        return cls(**values)

    def save(self, path: str | os.PathLike | None = None) -> Path:
        """Write as JSON (default: out_dir/summary.json)."""
        return write_json_atomic(path or Path(self.out_dir) / SUMMARY_FILE, self.to_dict())

    @classmethod
    def load(cls, path: str | os.PathLike) -> RunSummary:
        """Read a summary written by `save` (a file, or a run folder holding summary.json)."""
        path = Path(path)
        if path.is_dir():
            path = path / SUMMARY_FILE
        if not path.is_file():
            raise FileNotFoundError(f"no run summary at {path}: is this a finished `tinylm train` out-dir?")
        return cls.from_dict(json.loads(path.read_text(encoding="utf-8")))
