"""Sliding-window perplexity, cross-entropy per token and bits per byte of a causal LM over whole texts.

Each text is scored on its own: it is tokenised without special tokens and (by default) prefixed
with the bos token (the eos token when there is no bos; `<|endoftext|>` for TinyLM), so the first
token is scored too. This is lm-evaluation-harness's rolling log-likelihood convention (its HF
model's `prefix_token_id`): with `stride == context_length` the windows are exactly lm-eval's
(`get_rolling_token_windows(..., context_len=1)`), so the total log-likelihood equals lm-eval's
`loglikelihood_rolling` for the same text. A smaller stride gives every scored token more context.

Window rule: the scored positions are cut into chunks of `stride`; the input for the chunk ending
at position b is the `context_length` tokens before b, and only the chunk's tokens are scored.
Bits per byte = total negative log-likelihood (nats) / ln 2 / UTF-8 bytes: independent of the
tokenizer, so models with different vocabularies compare.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import torch
from tqdm.auto import tqdm

from ..corpus.documents import split_documents
from ..fileio import check_input_file
from ..tokenization.plain_text import encode_plain


def make_windows(n_tokens: int, *, context_length: int, stride: int) -> list[tuple[int, int, int]]:
    """Windows `(start, end, n_scored)` over a sequence of `n_tokens` ids.

    The model reads ids[start:end] and its last `n_scored` predictions score ids[end-n_scored+1:end+1].
    Scored positions are 1..n_tokens-1 (position 0 is the eos prefix, or without one the first
    token, which has nothing to be predicted from).
    """
    if stride < 1 or stride > context_length:
        raise ValueError(f"stride must be in [1, context_length={context_length}], got {stride}")
    windows = []
    first = 1
    while first < n_tokens:
        last = min(first + stride, n_tokens)  # scored targets: positions first..last-1
        start = max(0, last - 1 - context_length)
        windows.append((start, last - 1, last - first))
        first = last
    return windows


def _score_windows(model: Any, ids: torch.Tensor, windows: Sequence[tuple[int, int, int]], batch_size: int,
                   pad_id: int, progress: tqdm | None) -> float:
    """Sum of log p(target) over all windows, `batch_size` windows per forward pass."""
    total = 0.0
    device = next(model.parameters()).device
    for i in range(0, len(windows), batch_size):
        batch = windows[i : i + batch_size]
        width = max(end - start for start, end, _ in batch)
        # Right padding: with causal attention the real positions never see the pads after them.
        inputs = torch.full((len(batch), width), pad_id, dtype=torch.long)
        for row, (start, end, _) in enumerate(batch):
            inputs[row, : end - start] = ids[start:end]
        with torch.no_grad():
            logits = model(input_ids=inputs.to(device)).logits.float()
        logprobs = torch.log_softmax(logits, dim=-1)  # (B, T, V)
        for row, (start, end, n_scored) in enumerate(batch):
            length = end - start
            targets = ids[end - n_scored + 1 : end + 1].to(device)
            scored = logprobs[row, length - n_scored : length]  # (n_scored, V)
            total += scored.gather(-1, targets[:, None]).sum().item()
        if progress is not None:
            progress.update(sum(n for _, _, n in batch))
    return total


def evaluate_perplexity(
    model: Any,
    tokenizer: Any,
    texts: str | Iterable[str],
    *,
    stride: int | None = None,
    batch_size: int = 8,
    context_length: int | None = None,
    prefix_eos: bool = True,
    show_progress: bool = True,
) -> dict[str, float]:
    """Score whole texts with a sliding window; return totals and per-token / per-byte metrics.

    Returns `total_loglikelihood` (nats, summed over texts), `tokens` (scored tokens), `bytes`
    (UTF-8), `cross_entropy` (nats per token), `perplexity`, `bits_per_byte`, `texts`, and
    `round_trips` (whether the tokenizer gives every text back exactly; bits per byte compare across
    tokenizers only when it does).
    `context_length` defaults to the model's `max_position_embeddings`; `stride` to it as well
    (the lm-eval convention).
    """
    texts = [texts] if isinstance(texts, str) else list(texts)
    if not texts:
        raise ValueError("no texts to evaluate")
    context_length = context_length or getattr(model.config, "max_position_embeddings", None)
    if not context_length:
        raise ValueError("the model config has no max_position_embeddings; pass context_length=")
    stride = stride or context_length
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    # A BERT-style tokenizer has no bos/eos: the model's config names the id its documents ended with.
    eos_id = tokenizer.eos_token_id if tokenizer.eos_token_id is not None else model.config.eos_token_id
    bos_id = tokenizer.bos_token_id if tokenizer.bos_token_id is not None else model.config.bos_token_id
    prefix_id = bos_id if bos_id is not None else eos_id
    if prefix_eos and prefix_id is None:
        raise ValueError("neither the tokenizer nor the model config has a bos or eos token to prefix; "
                         "pass prefix_eos=False")
    pad_id = eos_id if eos_id is not None else 0
    encoded, round_trips = [], True
    for text in texts:
        ids = encode_plain(tokenizer, text)
        round_trips = round_trips and tokenizer.decode(ids) == text
        encoded.append(torch.tensor(([prefix_id] if prefix_eos else []) + list(ids), dtype=torch.long))
    plans = [make_windows(len(ids), context_length=context_length, stride=stride) for ids in encoded]
    n_tokens = sum(n for plan in plans for _, _, n in plan)
    was_training = model.training
    model.eval()
    progress = tqdm(total=n_tokens, unit="tok", desc="perplexity", disable=not show_progress, file=sys.stderr)
    try:
        total = sum(_score_windows(model, ids, plan, batch_size, pad_id, progress) for ids, plan in zip(encoded, plans))
    finally:
        progress.close()
        model.train(was_training)
    n_bytes = sum(len(text.encode("utf-8")) for text in texts)
    cross_entropy = -total / n_tokens if n_tokens else float("nan")
    return {
        "total_loglikelihood": total,
        "tokens": n_tokens,
        "bytes": n_bytes,
        "cross_entropy": cross_entropy,
        "perplexity": math.exp(cross_entropy) if n_tokens else float("nan"),
        "bits_per_byte": -total / math.log(2) / n_bytes if n_bytes else float("nan"),
        "texts": len(texts),
        # False: decoding the ids does not give the text back (WordPiece drops whitespace, <unk> drops
        # characters), so bits per byte leave out what the tokenizer dropped
        "round_trips": round_trips,
    }


def load_texts(inputs: Sequence[str] | None, dataset: str | None, *, split_docs: bool, limit: int | None) -> list[str]:
    """Texts to evaluate from files (`--input`) or a `datasets` dataset with a `text` column."""
    if bool(inputs) == bool(dataset):
        raise ValueError("give exactly one of --input FILE(s) or --dataset NAME")
    if limit is not None and limit < 1:
        raise ValueError(f"limit must be a positive number of documents, got {limit}")
    texts: list[str] = []
    if inputs:
        for name in inputs:
            path = check_input_file(name)
            text = path.read_text(encoding="utf-8")
            texts += split_documents(text, rule="separator") if split_docs else [text]
    else:
        import datasets

        name, _, split = dataset.partition(":")
        splits = datasets.load_dataset(name)
        split = split or next((s for s in ("validation", "test", "train") if s in splits), "")
        if split not in splits:
            raise ValueError(f"dataset {name} has no split {split!r} (splits: {sorted(splits)})")
        data = splits[split]
        if "text" not in data.column_names:
            raise ValueError(f"dataset {name} has no 'text' column (columns: {data.column_names})")
        texts = [t for t in data["text"] if t.strip()]
    return texts[:limit] if limit else texts
