"""Evaluation during training: validation loss, perplexity and bits per byte (masked-token loss and accuracy
for the mlm objective; loss, accuracy and macro-F1 for the seq_cls objective), and a sample from a fixed prompt."""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from .batches import iter_eval_batches
from ..modeling.loss_tinylm import IGNORE_INDEX
from ..tokenization.plain_text import encode_chat, encode_plain
from .functional import cross_entropy
from .step import model_logits


def _logits(
    model: torch.nn.Module,
    batches: Iterable[Sequence[torch.Tensor]],
    device: torch.device,
    max_batches: int | None,
    autocast: contextlib.AbstractContextManager | None,
) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """(logits, labels) of each of the first `max_batches` batches (all: None), with the model in eval mode."""
    was_training = model.training
    model.eval()
    try:
        for i, batch in enumerate(batches):
            if max_batches is not None and i >= max_batches:
                break
            batch = [t.to(device) for t in batch]
            with autocast or contextlib.nullcontext():
                logits = model_logits(model, batch)
            yield logits, batch[1]
    finally:
        model.train(was_training)


def _score(
    model: torch.nn.Module,
    batches: Iterable[tuple[torch.Tensor, torch.Tensor]],
    device: torch.device,
    max_batches: int | None,
    autocast: contextlib.AbstractContextManager | None,
    *,
    accuracy: bool = False,
) -> tuple[float, int, int]:
    """(summed loss, correct argmax predictions (if `accuracy`), targets) over the first `max_batches` batches."""
    total, correct, count = 0.0, 0, 0
    for logits, y in _logits(model, batches, device, max_batches, autocast):
        total += float(cross_entropy(logits, y, reduction="sum"))
        targets = y != IGNORE_INDEX
        count += int(targets.sum())
        if accuracy:
            correct += int((logits.argmax(-1)[targets] == y[targets]).sum())
    return total, correct, count


@torch.no_grad()
def evaluate(
    model: torch.nn.Module,
    data: np.ndarray,
    batch_size: int,
    context_length: int,
    device: torch.device,
    max_batches: int | None = None,
    bytes_per_token: float | None = None,
    autocast: contextlib.AbstractContextManager | None = None,
) -> dict[str, float]:
    """Mean loss over (the first `max_batches` of) the sequential validation batches: `val_loss`,
    `val_perplexity` and, given the data's bytes per token, `val_bpb`."""
    total, _, count = _score(model, iter_eval_batches(data, batch_size, context_length), device, max_batches, autocast)
    loss = total / max(count, 1)
    out = {"val_loss": loss, "val_perplexity": math.exp(min(loss, 700.0))}
    if bytes_per_token:
        out["val_bpb"] = loss / math.log(2) / bytes_per_token
    return out


def evaluate_whole_file(model: torch.nn.Module, data_dir: str | os.PathLike, context_length: int, *,
                        batch_size: int = 32, device: torch.device | None = None) -> dict[str, float]:
    """`evaluate` over every window of `data_dir`/val.bin, not a sample of batches: the figure to quote for a run.

    Bits per byte use the file's own bytes per token (its header), so models of different vocabularies compare.
    """
    from ..corpus.token_files import load_tokens, read_header

    path = Path(data_dir) / "val.bin"
    header = read_header(path)
    return evaluate(model, load_tokens(path), batch_size, context_length, device or torch.device("cpu"),
                    bytes_per_token=header["bytes"] / max(int(header["count"]), 1))


@torch.no_grad()
def evaluate_masked_lm(
    model: torch.nn.Module,
    batches: Iterable[tuple[torch.Tensor, torch.Tensor]],
    device: torch.device,
    max_batches: int | None = None,
    autocast: contextlib.AbstractContextManager | None = None,
) -> dict[str, float]:
    """Masked-token loss and accuracy over (the first `max_batches` of) `(masked ids, labels)` batches:
    `val_loss`, `val_perplexity` (exp of it) and `val_accuracy` (argmax equals the original token)."""
    total, correct, count = _score(model, batches, device, max_batches, autocast, accuracy=True)
    loss = total / max(count, 1)
    return {"val_loss": loss, "val_perplexity": math.exp(min(loss, 700.0)), "val_accuracy": correct / max(count, 1)}


@torch.no_grad()
def evaluate_classifier(
    model: torch.nn.Module,
    batches: Iterable[Sequence[torch.Tensor]],
    device: torch.device,
    autocast: contextlib.AbstractContextManager | None = None,
) -> dict[str, float]:
    """Scores over every batch of `(input_ids, labels, attention_mask)`: `val_loss` (the mean cross-entropy of
    the true labels), `val_accuracy` (the share whose highest-scoring label is the true one) and `val_macro_f1`."""
    total, predicted, expected = 0.0, [], []
    for logits, y in _logits(model, batches, device, None, autocast):
        total += float(cross_entropy(logits, y, reduction="sum"))
        predicted.append(logits.argmax(-1).cpu())
        expected.append(y.cpu())
    predictions, labels = torch.cat(predicted).numpy(), torch.cat(expected).numpy()
    return {"val_loss": total / len(labels), "val_accuracy": float(np.mean(predictions == labels)),
            "val_macro_f1": macro_f1(predictions, labels)}


def macro_f1(predictions: np.ndarray, labels: np.ndarray) -> float:
    """The unweighted mean of each label's F1 = 2TP / (2TP + FP + FN), over the labels that occur among `labels`
    or `predictions` (scikit-learn's `f1_score(labels, predictions, average="macro")`)."""
    scores = []
    for label in np.union1d(labels, predictions):
        true_positives = np.sum((predictions == label) & (labels == label))
        wrong = np.sum((predictions == label) != (labels == label))  # false positives + false negatives
        scores.append(2 * true_positives / (2 * true_positives + wrong))
    return float(np.mean(scores))


@torch.no_grad()
def sample_completion(model: torch.nn.Module, tokenizer: Any, prompt: str, max_new_tokens: int) -> str:
    """Greedy continuation of `prompt` (plain text: special-token text is not special), cut to the context."""
    ids = encode_plain(tokenizer, prompt)
    new_ids = greedy_ids(model, ids, max_new_tokens, stop_ids={tokenizer.eos_token_id} - {None})
    return tokenizer.decode(new_ids, skip_special_tokens=True)


@torch.no_grad()
def sample_reply(model: torch.nn.Module, tokenizer: Any, prompt: str, max_new_tokens: int) -> str:
    """The greedy reply to `prompt` sent as a user message (plain text) through the tokenizer's chat template."""
    from ..tokenization.chat_template import stop_token_ids

    messages = [{"role": "user", "content": prompt}]
    ids = encode_chat(tokenizer, messages, add_generation_prompt=True).ids
    new_ids = greedy_ids(model, ids, max_new_tokens, stop_ids=set(stop_token_ids(tokenizer)))
    return tokenizer.decode(new_ids, skip_special_tokens=True)


@torch.no_grad()
def greedy_ids(model: torch.nn.Module, ids: list[int], max_new_tokens: int, stop_ids: set[int]) -> list[int]:
    """The ids greedy decoding adds after `ids` (cut to the context), up to a stop id (kept) or `max_new_tokens`."""
    if not ids:
        return []
    context = model.config.max_position_embeddings
    ids = ids[-(context - 1):]
    max_new_tokens = min(max_new_tokens, context - len(ids))
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    x = torch.tensor([ids], device=device)
    for _ in range(max_new_tokens):
        next_id = model(input_ids=x).logits[0, -1].argmax()
        x = torch.cat([x, next_id.view(1, 1)], dim=1)
        if int(next_id) in stop_ids:
            break
    model.train(was_training)
    return x[0, len(ids):].tolist()
