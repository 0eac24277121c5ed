"""The data a run trains on: what the loop reads of any objective's data (`RunData`), and the prepared token
arrays of the language-model objectives (train.bin, val.bin), checked before any model is built."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..corpus.token_files import check_tokenizer_fingerprint, load_tokens, read_header, token_digest
from ..fileio import check_input_folder
from .config import TrainConfig
from .run.summary import DataProvenance


@dataclass
class RunData:
    """What the loop reads of an objective's data: where it came from, and the tokenizer's size and end token."""

    provenance: DataProvenance
    vocab_size: int
    eos_id: int | None


@dataclass
class TrainingData(RunData):
    """The prepared token arrays and what their headers say."""

    train: np.ndarray
    val: np.ndarray
    bytes_per_token: float | None


def open_data(config: TrainConfig) -> TrainingData:
    """Open train.bin/val.bin and check they can feed `config` (before any model is built)."""
    data_dir = check_input_folder(config.data_dir, "data folder", "make it with `tinylm prepare`")
    train, val = load_tokens(data_dir / "train.bin"), load_tokens(data_dir / "val.bin")
    train_header, val_header = read_header(data_dir / "train.bin"), read_header(data_dir / "val.bin")
    if train_header.get("tokenizer_fingerprint") != val_header.get("tokenizer_fingerprint"):
        raise ValueError(f"train.bin and val.bin in {data_dir} were made by different tokenizers; re-run prepare")
    for name, array in (("train.bin", train), ("val.bin", val)):
        if len(array) <= config.context_length:
            raise ValueError(
                f"{data_dir / name} has {len(array)} tokens, too few for context_length {config.context_length}: "
                "lower --context-length or prepare more text"
            )
    bytes_per_token = val_header.get("bytes", 0) / max(int(val_header["count"]), 1) or None
    provenance = DataProvenance.from_headers(train_header, val_header)
    if provenance.token_digest is None:  # data prepared before headers recorded it
        provenance.token_digest = f"{token_digest(train)}+{token_digest(val)}"
    check_published_tokenizer(config, provenance)
    vocab_size = max(int(train_header.get("vocab_size", 0)), int(train_header.get("max_id", -1)) + 1)  # ids may skip
    return TrainingData(provenance, vocab_size, train_header.get("eos_id"), train=train, val=val,
                        bytes_per_token=bytes_per_token)


def published_tokenizer(config: TrainConfig, data: RunData) -> Any:
    """The tokenizer the run will publish (`tokenizer_dir`, else the data's), loaded now, before the first step; None
    when there is none, or when it already lives in the run's folder (sft's chat tokenizer)."""
    from ..tokenizer_loading import load_tokenizer

    folder = config.tokenizer_dir or data.provenance.tokenizer_dir
    if not folder or not Path(folder).is_dir() or Path(config.out_dir).resolve() in Path(folder).resolve().parents:
        return None
    return load_tokenizer(folder)


def check_published_tokenizer(config: TrainConfig, provenance: DataProvenance) -> None:
    """The tokenizer the run will publish (`tokenizer_dir`, else the one prepare recorded) must exist and be the one
    that made the data: checked before the first step, not when the run is published after its last."""
    from ..tokenizer_loading import load_tokenizer

    folder = config.tokenizer_dir or provenance.tokenizer_dir
    if config.tokenizer_dir and not Path(config.tokenizer_dir).is_dir():
        raise FileNotFoundError(f"tokenizer folder {config.tokenizer_dir} does not exist")
    if folder and not Path(folder).is_dir():
        raise FileNotFoundError(f"the tokenizer folder {folder} that made the data in {config.data_dir} is missing, so "
                                "the trained model could not be published with it: pass --tokenizer-dir with that "
                                "tokenizer, or prepare the data again")
    if folder:
        check_tokenizer_fingerprint(load_tokenizer(folder), provenance.tokenizer_fingerprint, folder=folder,
                                    made=f"the data in {config.data_dir}")
