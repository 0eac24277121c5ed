"""The data a run trains on: what the loop reads of any objective's data (`RunData`), and the prepared token
arrays of the language-model objectives (train.bin, val.bin), checked before any model is built."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..corpus.token_files import load_tokens, read_header
from ..fileio import check_input_folder
from .config import TrainConfig
from .summary import DataProvenance


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
    return TrainingData(DataProvenance.from_headers(train_header, val_header), int(train_header.get("vocab_size", 0)),
                        train_header.get("eos_id"), train=train, val=val, bytes_per_token=bytes_per_token)
