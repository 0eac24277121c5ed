"""Masked-LM batches for the training loop, and static masks stored beside the prepared data.

The loop cuts the same random windows as for the causal objective, then masks them: with a dynamic
strategy by `MLMCollator` seeded by (seed, iteration, micro-batch), so a resumed run masks exactly as
the uninterrupted one; with ``"static"`` by reading the masks `write_static_masks` stored once
(`tinylm prepare --mlm-static`), so every epoch sees the same masks. Each split then has two more
token files: `<split>.masked.bin` (the input ids after masking) and `<split>.chosen.bin` (uint8, 1 where
the token carries a label).
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ...corpus.token_files import load_tokens, read_header, token_digest, tokenizer_fingerprint, write_tokens
from ..batches import iter_eval_batches
from ..config import check_seed
from .masking import IGNORE_INDEX, MLMCollator

MASKED_SUFFIX = ".masked.bin"
CHOSEN_SUFFIX = ".chosen.bin"
STATIC_ROW = 512  # tokens hashed together when static masks are made for a flat token stream


def static_mask_paths(data_dir: str | os.PathLike, split: str) -> tuple[Path, Path]:
    """(masked ids, chosen flags) files of a split."""
    return Path(data_dir) / f"{split}{MASKED_SUFFIX}", Path(data_dir) / f"{split}{CHOSEN_SUFFIX}"


def check_static_masking(tokenizer: Any, *, mlm_probability: float = 0.15, seed: int = 0) -> MLMCollator:
    """The collator that `write_static_masks` masks with: its options, seed and the tokenizer's mask token checked."""
    return MLMCollator(tokenizer, "static", mlm_probability=mlm_probability, seed=check_seed(seed, "mlm_seed"))


def write_static_masks(
    data_dir: str | os.PathLike, tokenizer: Any, *, mlm_probability: float = 0.15, seed: int = 0
) -> dict[str, dict[str, Any]]:
    """Mask train.bin and val.bin once with the ``"static"`` strategy and store the result beside them."""
    collator = check_static_masking(tokenizer, mlm_probability=mlm_probability, seed=seed)
    headers = {}
    for split in ("train", "val"):
        source = Path(data_dir) / f"{split}.bin"
        tokens, header = load_tokens(source), read_header(source)
        if header.get("tokenizer_fingerprint") != tokenizer_fingerprint(tokenizer):
            raise ValueError(f"{source} was made by another tokenizer than the one given; pass the data's tokenizer")
        masked, chosen = _mask_stream(collator, tokens)
        info = {**header, "mlm": {"strategy": "static", "mlm_probability": mlm_probability, "seed": seed,
                                  "source": source.name, "source_digest": token_digest(tokens)}}
        masked_path, chosen_path = static_mask_paths(data_dir, split)
        headers[split] = write_tokens([masked], masked_path, np.dtype(header["dtype"]), len(tokens), info)
        write_tokens([chosen], chosen_path, np.dtype(np.uint8), len(tokens), {**info, "flags": True})
    return headers


def _mask_stream(collator: MLMCollator, tokens: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mask a flat token stream in rows of STATIC_ROW tokens: (masked ids, chosen flags as uint8)."""
    n = len(tokens)
    rows = math.ceil(n / STATIC_ROW)
    ids = np.zeros(rows * STATIC_ROW, dtype=np.int64)
    ids[:n] = tokens
    valid = np.arange(rows * STATIC_ROW) < n
    masked, labels = collator.mask_tokens(ids.reshape(rows, STATIC_ROW), valid.reshape(rows, STATIC_ROW))
    return masked.ravel()[:n], (labels.ravel()[:n] != IGNORE_INDEX).astype(np.uint8)


@dataclass
class StaticMasks:
    """The stored masks of one split, aligned token for token with its token array."""

    masked: np.ndarray
    chosen: np.ndarray

    @classmethod
    def open(cls, data_dir: str | os.PathLike, split: str, tokens: np.ndarray, *,
             mlm_probability: float | None = None) -> StaticMasks:
        """The masks of `split` (its token array `tokens`), checked to be the masks of exactly these tokens and,
        when given, of `mlm_probability`."""
        masked_path, chosen_path = static_mask_paths(data_dir, split)
        if not masked_path.is_file() or not chosen_path.is_file():
            raise FileNotFoundError(
                f"static masking needs {masked_path.name} and {chosen_path.name} in {data_dir}: "
                "make the data with `tinylm prepare --mlm-static`, or pick a dynamic --masking strategy"
            )
        masked, chosen = load_tokens(masked_path), load_tokens(chosen_path)
        made = [read_header(path).get("mlm") or {} for path in (masked_path, chosen_path)]
        digest = token_digest(tokens)
        if len(masked) != len(tokens) or len(chosen) != len(tokens) or any(m.get("source_digest") != digest for m in made):
            raise ValueError(f"the static masks in {data_dir} were not made from this {split}.bin (it was prepared again, "
                             "or the masks are older than the check); re-run `tinylm prepare --mlm-static`")
        stored = made[0].get("mlm_probability")
        if mlm_probability is not None and stored != mlm_probability:
            raise ValueError(f"the static masks in {data_dir} mask {stored} of the tokens, the run asks for "
                             f"mlm_probability {mlm_probability}: pass --mlm-probability {stored}, or re-run "
                             f"`tinylm prepare --mlm-static --mlm-probability {mlm_probability}`")
        return cls(masked, chosen)

    def window(self, tokens: np.ndarray, start: int, length: int) -> tuple[np.ndarray, np.ndarray]:
        """(masked input ids, labels) of the window tokens[start : start + length]."""
        original = np.asarray(tokens[start : start + length], dtype=np.int64)
        chosen = np.asarray(self.chosen[start : start + length], dtype=bool)
        return np.asarray(self.masked[start : start + length], dtype=np.int64), np.where(chosen, original, IGNORE_INDEX)


def mask_windows(
    x: torch.Tensor, collator: MLMCollator, rng: np.random.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """(masked input ids, labels) for a (batch, seq) window batch, masked on the CPU by the collator."""
    masked, labels = collator.mask_tokens(x.cpu().numpy(), rng=rng)
    return torch.from_numpy(masked).to(x.device), torch.from_numpy(labels).to(x.device)


def static_windows(
    tokens: np.ndarray, masks: StaticMasks, starts: torch.Tensor, length: int, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor]:
    """The stored (masked input ids, labels) of windows at `starts`."""
    pairs = [masks.window(tokens, int(s), length) for s in starts]
    x = torch.from_numpy(np.stack([p[0] for p in pairs]))
    y = torch.from_numpy(np.stack([p[1] for p in pairs]))
    return x.to(device), y.to(device)


def iter_mlm_eval_batches(
    tokens: np.ndarray, batch_size: int, context_length: int, collator: MLMCollator, seed: int,
    masks: StaticMasks | None = None,
) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """The validation walk of the causal objective, masked the same way at every evaluation."""
    rng = np.random.default_rng(seed)
    offset = 0
    for x, _ in iter_eval_batches(tokens, batch_size, context_length):
        if masks is None:
            yield mask_windows(x, collator, rng)
        else:
            starts = torch.arange(x.shape[0]) * x.shape[1] + offset
            yield static_windows(tokens, masks, starts, x.shape[1], torch.device("cpu"))
        offset += x.numel()
