"""Run metrics: metrics.jsonl, the console (a progress bar on a terminal, plain lines elsewhere),
experiment trackers (TensorBoard, Trackio, W&B when installed), the `RunLog` that feeds them all, and the
loss plot.

One vocabulary end to end: `iter`, `tokens`, `loss`, `lr`, `grad_norm`, `tok_per_s` for training
steps (and an objective's own: DPO's `rewards/chosen`, `rewards/rejected`, `rewards/accuracies`,
`rewards/margins`, TRL's names); `val_loss`, `val_perplexity`, `val_bpb`, `val_accuracy`, `val_macro_f1` and `sample`
for evaluations.
`RunSummary` and the model card use the same names.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from ..fileio import FILE_MODE, atomic_output, write_text_atomic
from .config import TrainConfig
from .run.folder import METRICS_FILE, TENSORBOARD_DIR

TRACKER_PACKAGES = {"tensorboard": "tensorboard", "trackio": "trackio", "wandb": "wandb"}  # each the extra of its name
REWARD_CURVES = (("rewards/margins", "margin"), ("rewards/chosen", "chosen"), ("rewards/rejected", "rejected"),
                 ("val_reward_margin", "validation margin"))  # record key, label: DPO's panel of loss.png


def rewrite_metrics(path: Path, records: list[dict[str, Any]]) -> None:
    """Replace metrics.jsonl with `records` (on resume: the lines up to the checkpoint's step)."""
    write_text_atomic(path, "".join(json.dumps(r) + "\n" for r in records))


class Tracker:
    """A thin adapter over an experiment tracker's `log(metrics, step)`; `none` logs nothing."""

    def __init__(self, kind: str, out_dir: Path, run_id: str, config: dict[str, Any]) -> None:
        self.kind = kind
        self._writer: Any = None
        if kind == "none":
            return
        try:
            if kind == "tensorboard":
                from torch.utils.tensorboard import SummaryWriter

                self._writer = SummaryWriter(log_dir=str(out_dir / TENSORBOARD_DIR))
            elif kind == "trackio":
                import trackio

                trackio.init(project="tinylm", name=run_id, config=config)
                self._writer = trackio
            elif kind == "wandb":
                import wandb

                self._writer = wandb.init(project="tinylm", name=run_id, id=run_id, resume="allow",
                                          config=config, dir=str(out_dir))
        except ImportError as err:
            raise ImportError(
                f"report_to={kind} needs the {TRACKER_PACKAGES[kind]} package: pip install 'tinylm-hf[{kind}]' "
                f"({err})"
            ) from None

    def log(self, record: dict[str, Any]) -> None:
        """Send the numeric entries of one metrics record, at its `iter`."""
        if self._writer is None:
            return
        step = int(record["iter"])
        numbers = {k: v for k, v in record.items() if k != "iter" and isinstance(v, (int, float))}
        if self.kind == "tensorboard":
            for key, value in numbers.items():
                self._writer.add_scalar(key, value, step)
        else:
            self._writer.log(numbers, step=step)

    def close(self) -> None:
        """Flush and close the tracker."""
        if self._writer is None:
            return
        if self.kind == "tensorboard":
            self._writer.close()
        else:  # trackio and wandb runs
            self._writer.finish()


class Console:
    """Progress for people: a tqdm bar on a terminal, one plain line every `every` steps otherwise."""

    def __init__(self, total: int, initial: int, *, enabled: bool, every: int = 50) -> None:
        self.enabled = enabled
        self.every = every
        self.bar = None
        if enabled and sys.stdout.isatty():
            from tqdm.auto import tqdm

            self.bar = tqdm(total=total, initial=initial, desc="train", unit="step", dynamic_ncols=True)

    def step(self, record: dict[str, Any]) -> None:
        """Report one finished step."""
        if not self.enabled:
            return
        if self.bar is not None:
            self.bar.update(1)
            self.bar.set_postfix(loss=f"{record['loss']:.3f}", lr=f"{record['lr']:.2e}",
                                 tok_s=f"{record['tok_per_s']:,.0f}")
        elif record["iter"] % self.every == 0:
            print(f"iter {record['iter']}: loss {record['loss']:.4f}, lr {record['lr']:.2e}, "
                  f"{record['tok_per_s']:,.0f} tok/s", flush=True)

    def write(self, message: str) -> None:
        """A line that stays (evaluations, checkpoints, warnings)."""
        if self.bar is not None:
            self.bar.write(message)
        else:
            print(message, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


class MetricsLog:
    """Appends each record to metrics.jsonl (and the tracker) as it happens, so a killed run keeps its log."""

    def __init__(self, path: Path, records: list[dict[str, Any]], tracker: Tracker | None = None) -> None:
        self.path = path
        self.records = records
        self.tracker = tracker

    def add(self, record: dict[str, Any], *, write: bool = True) -> None:
        """Keep `record`; with `write`, append it to the file and send it to the tracker."""
        self.records.append(record)
        if not write:
            return
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, FILE_MODE)
        if os.fstat(fd).st_size == 0:
            os.fchmod(fd, FILE_MODE)  # the file is new (ours): 0644 whatever the umask
        with open(fd, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(record) + "\n")
        if self.tracker is not None:
            self.tracker.log(record)


class RunLog:
    """Where a training run's records go: metrics.jsonl and the tracker (main process only), and the console.

    Use it as a context manager: leaving it closes the progress bar and the tracker.
    """

    def __init__(self, config: TrainConfig, run_path: Path, run_id: str | None, records: list[dict[str, Any]], *,
                 total: int, initial: int, main: bool) -> None:
        path = run_path / METRICS_FILE
        # the tracker first: a missing tracker package then fails before metrics.jsonl exists, and the failed start
        # leaves the folder as it was (`RunDirectory.abandon`)
        self.tracker = Tracker(config.report_to, run_path, run_id or "run", config.to_dict()) if main else None
        if main:
            rewrite_metrics(path, records)  # on resume: the lines up to the checkpoint's step
        self.metrics = MetricsLog(path, records, self.tracker)
        self.console = Console(total, initial, enabled=main and config.progress)
        self.main, self.log_every = main, config.log_every

    def __enter__(self) -> RunLog:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.console.close()
        if self.tracker is not None:
            self.tracker.close()

    def step(self, record: dict[str, Any], *, last: bool) -> None:
        """A finished step (written every `log_every` steps and at the `last`)."""
        self.metrics.add(record, write=self.main and (record["iter"] % self.log_every == 0 or last))
        self.console.step(record)

    def evaluation(self, record: dict[str, Any]) -> None:
        """An evaluation (main process): written, and shown as one line with its sample."""
        self.metrics.add(record)
        self.console.write(eval_line(record))

    def write(self, message: str) -> None:
        """A line for people, shown by the main process."""
        if self.main:
            self.console.write(message)


EVAL_LINE_FIELDS = (("val_perplexity", "ppl", ".2f"), ("val_bpb", "bpb", ".3f"), ("val_accuracy", "accuracy", ".3f"),
                    ("val_macro_f1", "macro-F1", ".3f"))  # record key, console name, format


def eval_line(result: dict[str, Any]) -> str:
    """The console line of an evaluation record."""
    line = f"iter {result['iter']}: val loss {result['val_loss']:.4f}"
    for key, name, spec in EVAL_LINE_FIELDS:
        if key in result:
            line += f", {name} {result[key]:{spec}}"
    if "sample" in result:
        line += f"\n  sample: {result.get('sample_prompt', '')!r} -> {result['sample']!r}"
    return line


def plot_losses(metrics: list[dict[str, Any]], path: str | os.PathLike) -> None:
    """Training and validation loss against tokens seen, as a PNG (matplotlib, Agg backend); a DPO run's rewards in a
    panel beside it."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    train = [(m["tokens"], m["loss"]) for m in metrics if "loss" in m]
    val = [(m["tokens"], m["val_loss"]) for m in metrics if "val_loss" in m]
    rewards = any(REWARD_CURVES[0][0] in m for m in metrics)
    fig, axes = plt.subplots(1, 2 if rewards else 1, figsize=(13 if rewards else 7, 4.5), squeeze=False)
    ax = axes[0][0]
    if rewards:
        plot_rewards(axes[0][1], metrics)
    if train:
        ax.plot(*zip(*train), label="train", linewidth=1)
    if val:
        ax.plot(*zip(*val), "o-", label="validation")
    ax.set_xlabel("tokens")
    ax.set_ylabel("loss (nats/token)")
    ax.set_title("TinyLM training")
    ax.grid(alpha=0.3)
    ax.legend()
    try:
        with atomic_output(path) as tmp:
            fig.savefig(tmp, format="png", dpi=100, bbox_inches="tight")
    finally:
        plt.close(fig)



def plot_rewards(ax: Any, metrics: list[dict[str, Any]]) -> None:
    """DPO's rewards per training step (TRL's `rewards/*`) and the validation margin, against tokens seen."""
    for key, label in REWARD_CURVES:
        points = [(m["tokens"], m[key]) for m in metrics if key in m]
        if points:
            ax.plot(*zip(*points), "o-" if key.startswith("val_") else "-", label=label, linewidth=1)
    ax.axhline(0.0, color="grey", linewidth=0.5)
    ax.set_xlabel("tokens")
    ax.set_ylabel("reward (beta * log-ratio to the reference)")
    ax.set_title("DPO rewards")
    ax.grid(alpha=0.3)
    ax.legend()
