"""Masked-LM data collation: `MLMCollator` and its five masking strategies, vectorised over the batch.

Every strategy chooses `mlm_probability` of the maskable tokens (not special, not padding) in
expectation, then replaces each chosen token by the mask token (80%), a random non-special token (10%)
or keeps it (10%); `labels` hold the original token at chosen positions and -100 elsewhere.

- ``"dynamic"`` (RoBERTa): tokens chosen independently, a fresh draw on every call.
- ``"static"`` (BERT): tokens chosen independently, but the draw is a hash of (seed, the row's real
  tokens, the position): the same sequence always gets the same mask. `tinylm prepare --mlm-static`
  stores such masks with the data.
- ``"whole_word"``: words chosen independently; all pieces of a chosen word are chosen.
- ``"ngram"`` (ERNIE / ALBERT): runs of n = 1..max_ngram words, P(n) proportional to 1/n.
- ``"span"`` (SpanBERT): runs of words with a geometric length (p = span_p) cut off at max_span_length
  (renormalised, mean 3.8 words for p = 0.2); the 80/10/10 replacement is decided per span.

N-grams and spans are laid out as an alternating renewal process over each row's words (a run, then a
gap of at least one word), its gaps sized so runs cover `mlm_probability` of the words; runs never touch,
so the runs of chosen words are exactly the drawn n-grams/spans. Word boundaries come from the
tokenizer's vocabulary (`word_boundary_tables`), never from re-tokenising text.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

from ...modeling.loss_tinylm import IGNORE_INDEX
from ...tokenization.families import vocabulary_family
from .sections import MASKING_STRATEGIES as STRATEGIES

_MASK64 = (1 << 64) - 1


# ----------------------------------------------------------------------------- word boundaries


def _token_strings(tokenizer: Any) -> list[str | None]:
    """id -> token string, for every id up to len(tokenizer) (None where the id has no token)."""
    vocab = tokenizer.get_vocab()
    size = max(len(tokenizer), max(vocab.values(), default=-1) + 1)
    tokens: list[str | None] = [None] * size
    for token, index in vocab.items():
        tokens[index] = token
    return tokens


def boundary_style(tokenizer: Any) -> str:
    """The name of the word-boundary rule of `tokenizer`'s vocabulary (its family's, `FAMILIES`)."""
    return vocabulary_family(tokenizer, _token_strings(tokenizer)).word_style


def word_boundary_tables(tokenizer: Any) -> tuple[np.ndarray, np.ndarray]:
    """Per token id: (starts a word, ends with a line break), boolean arrays of length len(tokenizer).

    The rule is the tokenizer's family's (`TokenizerFamily.word_boundaries`): ``##`` continues a WordPiece word,
    a byte-level token starting with a whitespace byte (``Ġ``, ``Ċ``) or a sentencepiece one starting with ``▁``
    starts one. A token after one that ends in a line break also starts a word (``Ċ`` then ``Once``: GPT-2's
    pre-tokenizer gives the word no space); a trailing space (a lone ``Ġ`` or ``▁``) belongs to the
    next token's word instead. `MLMCollator` applies that rule.
    """
    tokens = _token_strings(tokenizer)
    starts, ends = vocabulary_family(tokenizer, tokens).word_boundaries(tokens, tokenizer)
    starts, ends = np.asarray(starts, dtype=bool), np.asarray(ends, dtype=bool)
    for index in tokenizer.all_special_ids:  # special tokens are never inside a word
        starts[index], ends[index] = True, True
    return starts, ends


# ----------------------------------------------------------------------------- run-length distributions


def span_length_distribution(span_p: float, max_span_length: int) -> np.ndarray:
    """P(length = 1..max_span_length): geometric(span_p) cut off at max_span_length and renormalised (SpanBERT)."""
    lengths = np.arange(1, max_span_length + 1)
    weights = span_p * (1 - span_p) ** (lengths - 1)
    return weights / weights.sum()


def ngram_length_distribution(max_ngram: int) -> np.ndarray:
    """P(n = 1..max_ngram) proportional to 1/n (ERNIE / ALBERT n-gram masking: shorter n-grams more likely)."""
    weights = 1.0 / np.arange(1, max_ngram + 1)
    return weights / weights.sum()


# ----------------------------------------------------------------------------- the collator


class MLMCollator:
    """A `transformers.Trainer` data collator for masked-LM pretraining with one of `STRATEGIES`.

    Called with a list of examples (dicts with ``input_ids`` and optionally ``attention_mask``, or bare
    id sequences), it pads them on the right with the tokenizer's pad token and returns ``input_ids``
    (masked), ``attention_mask`` and ``labels`` (-100 where not chosen) as long tensors.

    >>> collator = MLMCollator(tokenizer, "span", seed=0)        # doctest: +SKIP
    >>> batch = collator([{"input_ids": ids} for ids in rows])   # doctest: +SKIP
    """

    def __init__(
        self,
        tokenizer: Any,
        strategy: str = "dynamic",
        *,
        mlm_probability: float = 0.15,
        mask_replace_prob: float = 0.8,
        random_replace_prob: float = 0.1,
        max_span_length: int = 10,
        span_p: float = 0.2,
        max_ngram: int = 3,
        seed: int | None = None,
    ) -> None:
        _check_options(strategy, mlm_probability, mask_replace_prob, random_replace_prob, max_span_length, span_p,
                       max_ngram)
        check_mask_token(tokenizer)
        self.tokenizer = tokenizer
        self.strategy = strategy
        self.mlm_probability = mlm_probability
        self.mask_replace_prob = mask_replace_prob
        self.random_replace_prob = random_replace_prob
        self.max_span_length = max_span_length
        self.span_p = span_p
        self.max_ngram = max_ngram
        self.seed = seed
        self.mask_token_id = int(tokenizer.mask_token_id)
        self.pad_token_id = tokenizer.pad_token_id
        self.rng = np.random.default_rng(seed)
        self._word_starts, self._ends_line = word_boundary_tables(tokenizer)
        self._special = np.zeros(len(self._word_starts), dtype=bool)
        self._special[list(tokenizer.all_special_ids)] = True
        self._random_ids = np.flatnonzero(~self._special)  # replacement candidates: every non-special token
        if strategy == "span":
            self.run_lengths = span_length_distribution(span_p, max_span_length)
        elif strategy == "ngram":
            self.run_lengths = ngram_length_distribution(max_ngram)
        else:
            self.run_lengths = None

    def __call__(self, examples: Sequence[Any]) -> dict[str, torch.Tensor]:
        input_ids, attention_mask = self._pad(examples)
        masked, labels = self.mask_tokens(input_ids, attention_mask)
        return {
            "input_ids": torch.from_numpy(masked),
            "attention_mask": torch.from_numpy(attention_mask.astype(np.int64)),
            "labels": torch.from_numpy(labels),
        }

    # ---- public numpy entry point

    def mask_tokens(
        self,
        input_ids: np.ndarray,
        attention_mask: np.ndarray | None = None,
        *,
        rng: np.random.Generator | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """(masked input ids, labels) for a (batch, seq) id array; ``attention_mask`` 0 marks padding.

        ``rng`` replaces the collator's own generator for this call (the training loop passes one
        seeded by the step, so a resumed run masks exactly as the uninterrupted one).
        """
        input_ids = np.asarray(input_ids, dtype=np.int64)
        if input_ids.ndim != 2:
            raise ValueError(f"input_ids must be a (batch, seq) array, got shape {input_ids.shape}")
        if input_ids.size and (input_ids.min() < 0 or input_ids.max() >= len(self._special)):
            raise ValueError(f"input_ids hold ids outside the tokenizer's vocabulary [0, {len(self._special)})")
        valid = np.ones(input_ids.shape, dtype=bool) if attention_mask is None else np.asarray(attention_mask, bool)
        maskable = valid & ~self._special[input_ids]
        rng = rng or self.rng
        if self.strategy == "static":
            choose, replace, pick = _hash_uniforms(input_ids, valid, self.seed or 0, 3)
            chosen = maskable & (choose < self.mlm_probability)
            return self._replace(input_ids, chosen, replace, pick)
        if self.strategy == "dynamic":
            chosen = maskable & (rng.random(input_ids.shape) < self.mlm_probability)
            replace = rng.random(input_ids.shape)
        else:
            chosen, replace = self._choose_words(input_ids, maskable, rng)
        return self._replace(input_ids, chosen, replace, rng)

    # ---- internals

    def _pad(self, examples: Sequence[Any]) -> tuple[np.ndarray, np.ndarray]:
        """Right-pad the examples into (batch, seq) ids and a boolean attention mask."""
        if len(examples) == 0:
            raise ValueError("MLMCollator got an empty batch")
        if isinstance(examples[0], Mapping):
            rows = [e["input_ids"] for e in examples]
            masks = [e.get("attention_mask") for e in examples]
        else:
            rows, masks = list(examples), [None] * len(examples)
        lengths = [len(r) for r in rows]
        width = max(lengths)
        if all(n == width for n in lengths):
            ids = torch.stack(rows).numpy() if isinstance(rows[0], torch.Tensor) else np.asarray(rows, dtype=np.int64)
            ids = ids.astype(np.int64, copy=False)
            valid = np.ones(ids.shape, dtype=bool)
        else:
            if self.pad_token_id is None:
                raise ValueError(
                    "examples of different lengths need padding but the tokenizer has no pad token: set "
                    "tokenizer.pad_token (e.g. to its eos token), or give equal-length examples"
                )
            ids = np.full((len(rows), width), self.pad_token_id, dtype=np.int64)
            valid = np.zeros((len(rows), width), dtype=bool)
            for i, row in enumerate(rows):
                ids[i, : lengths[i]] = np.asarray(row, dtype=np.int64)
                valid[i, : lengths[i]] = True
        for i, mask in enumerate(masks):
            if mask is not None:
                valid[i, : lengths[i]] &= np.asarray(mask, dtype=bool)
        return ids, valid

    def _word_index(self, input_ids: np.ndarray, maskable: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per token, the index of its word among the row's maskable words; and each row's word count."""
        after_break = np.zeros_like(maskable)
        after_break[:, 1:] = self._ends_line[input_ids[:, :-1]] | ~maskable[:, :-1]
        after_break[:, 0] = True
        starts = maskable & (self._word_starts[input_ids] | after_break)
        return np.cumsum(starts, axis=1) - 1, starts.sum(axis=1)

    def _choose_words(
        self, input_ids: np.ndarray, maskable: np.ndarray, rng: np.random.Generator
    ) -> tuple[np.ndarray, np.ndarray]:
        """Chosen tokens and the replacement draw per token for the word-level strategies."""
        word_index, n_words = self._word_index(input_ids, maskable)
        batch, width = input_ids.shape[0], int(n_words.max(initial=0)) + 1
        flat = np.maximum(word_index, 0) + np.arange(batch)[:, None] * width  # token -> its word, flattened
        if self.strategy == "whole_word":
            word_chosen = rng.random(batch * width) < self.mlm_probability
            return maskable & word_chosen[flat], rng.random(input_ids.shape)
        word_chosen, run_id = _lay_out_runs(n_words, width, self.run_lengths, self.mlm_probability, rng)
        chosen = maskable & word_chosen.ravel()[flat]
        if self.strategy == "span":  # SpanBERT: one replacement decision for the whole span
            per_run = rng.random(int(run_id.max(initial=0)) + 1)
            return chosen, per_run[run_id.ravel()[flat]]
        return chosen, rng.random(input_ids.shape)

    def _replace(
        self, input_ids: np.ndarray, chosen: np.ndarray, replace: np.ndarray, pick: np.ndarray | np.random.Generator
    ) -> tuple[np.ndarray, np.ndarray]:
        """80/10/10: chosen tokens become the mask token, a random non-special token, or stay.

        ``pick`` draws the random tokens: uniforms per position (static masking), or a generator.
        """
        labels = np.where(chosen, input_ids, IGNORE_INDEX)
        masked = input_ids.copy()
        to_mask = chosen & (replace < self.mask_replace_prob)
        to_random = chosen & ~to_mask & (replace < self.mask_replace_prob + self.random_replace_prob)
        masked[to_mask] = self.mask_token_id
        if isinstance(pick, np.random.Generator):
            picks = pick.integers(0, len(self._random_ids), int(to_random.sum()))
        else:
            picks = (pick[to_random] * len(self._random_ids)).astype(np.int64)
        masked[to_random] = self._random_ids[picks]
        return masked, labels


def check_mask_token(tokenizer: Any) -> None:
    """Refuse a tokenizer without a mask token, or whose mask token is also its eos, pad, bos or unk token (every
    document boundary, pad or unknown character would then read as a mask)."""
    if tokenizer.mask_token_id is None:
        raise ValueError(
            f"the tokenizer ({type(tokenizer).__name__}) has no mask token: add one, e.g. "
            "tokenizer.add_special_tokens({'mask_token': '<|mask|>'}) (then resize the model's embeddings), "
            "or train it with `tinylm train-tokenizer --masked-lm` (its default special tokens and '<|mask|>')"
        )
    shared = [role for role in ("eos", "pad", "bos", "unk") if getattr(tokenizer, f"{role}_token_id") == tokenizer.mask_token_id]
    if shared:
        raise ValueError(
            f"the tokenizer's mask token {tokenizer.mask_token!r} is also its {'/'.join(shared)} token: every "
            f"{'/'.join(shared)} position would read as a mask; train it again with `tinylm train-tokenizer "
            "--masked-lm` (its default special tokens and '<|mask|>')"
        )


def _check_options(strategy: str, mlm_probability: float, mask_replace_prob: float, random_replace_prob: float,
                   max_span_length: int, span_p: float, max_ngram: int) -> None:
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown masking strategy {strategy!r}: choose one of {', '.join(STRATEGIES)}")
    for name, value in (("mlm_probability", mlm_probability), ("span_p", span_p)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < 1:
            raise ValueError(f"{name} must be a probability strictly between 0 and 1 (e.g. 0.15), got {value!r}")
    for name, value in (("mask_replace_prob", mask_replace_prob), ("random_replace_prob", random_replace_prob)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
            raise ValueError(f"{name} must be a probability in [0, 1] (e.g. 0.8 and 0.1), got {value!r}")
    if mask_replace_prob + random_replace_prob > 1:
        raise ValueError(
            f"mask_replace_prob + random_replace_prob must be at most 1 (the rest is kept), got "
            f"{mask_replace_prob} + {random_replace_prob}"
        )
    for name, value in (("max_span_length", max_span_length), ("max_ngram", max_ngram)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be an integer >= 1, got {value!r}")


def _lay_out_runs(
    n_words: np.ndarray, width: int, run_lengths: np.ndarray, probability: float, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Runs of words (lengths drawn from `run_lengths`) separated by gaps, covering `probability` of the words.

    Each row is an alternating renewal process: gap, run, gap, run, ... started `burn_in` words before
    the row so that its first word is covered with the stationary probability. Gaps are 1 + a geometric
    count with mean chosen so that mean run / (mean run + mean gap) = probability (gaps may be 0 only
    when `probability` is too high for separated runs). Returns (word chosen, run id of each word), both
    (batch, width); a run id is shared by the words of one run and by no other run.
    """
    batch = len(n_words)
    lengths = np.arange(1, len(run_lengths) + 1)
    mean_run = float(lengths @ run_lengths)
    mean_gap = mean_run * (1 - probability) / probability
    min_gap = 1 if mean_gap >= 1 else 0
    success = 1.0 / (1.0 + mean_gap - min_gap)  # geometric on {0, 1, ...} with mean mean_gap - min_gap
    burn_in = int(math.ceil(2 * (mean_run + mean_gap)))
    n_runs = int(math.ceil((burn_in + width) / (mean_run + mean_gap) * 1.5)) + 8
    cdf = np.cumsum(run_lengths)
    runs, ends = np.zeros((batch, 0), dtype=np.int64), np.full((batch, 1), -burn_in, dtype=np.int64)
    while (ends[:, -1] < n_words).any():  # extend, never redraw: a redraw would bias the gaps
        more = np.searchsorted(cdf, rng.random((batch, n_runs)) * cdf[-1], side="right") + 1
        gaps = rng.geometric(success, (batch, n_runs)) - 1 + min_gap
        runs = np.concatenate([runs, more], axis=1)
        ends = np.concatenate([ends, ends[:, -1:] + np.cumsum(more + gaps, axis=1)], axis=1)
    ends = ends[:, 1:]  # each run ends where its gap+run cycle ends
    # +1 where a run starts, -1 where it ends, on a (batch, width + 1) grid; runs outside the row vanish
    limit = n_words[:, None]
    starts = np.clip(ends - runs, 0, limit)
    ends = np.clip(ends, 0, limit)
    offsets = np.arange(batch)[:, None] * (width + 1)
    size = batch * (width + 1)
    opened = np.bincount((starts + offsets).ravel(), minlength=size)
    closed = np.bincount((ends + offsets).ravel(), minlength=size)
    inside = np.cumsum((opened - closed).reshape(batch, width + 1), axis=1)[:, :width] > 0
    run_id = np.cumsum(opened).reshape(batch, width + 1)[:, :width]  # counted over all rows: unique per run
    return inside, run_id


def _splitmix64(x: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser on uint64 arrays (wrapping arithmetic): a well-mixed hash of each value."""
    x = x ^ (x >> np.uint64(30))
    x = x * np.uint64(0xBF58476D1CE4E5B9)
    x = x ^ (x >> np.uint64(27))
    x = x * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def _hash_uniforms(input_ids: np.ndarray, valid: np.ndarray, seed: int, count: int) -> list[np.ndarray]:
    """`count` arrays of uniforms in [0, 1) that depend only on (seed, the row's real tokens, the position).

    The row key is a polynomial hash of the non-padding ids, so the same sequence gets the same numbers
    whatever it is batched or padded with: the draw behind static masking.
    """
    batch, seq = input_ids.shape
    ids = np.where(valid, input_ids + 1, 0).astype(np.uint64)
    powers = _splitmix64(np.arange(1, seq + 1, dtype=np.uint64))  # one odd-ish multiplier per position
    with np.errstate(over="ignore"):
        row_key = _splitmix64((ids * powers).sum(axis=1, dtype=np.uint64) ^ np.uint64(seed & _MASK64))
        positions = np.arange(seq, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
        out = []
        for k in range(count):
            x = _splitmix64(row_key[:, None] + positions + np.uint64((k + 1) * 0xD1B54A32D192ED03 & _MASK64))
            out.append((x >> np.uint64(11)).astype(np.float64) * (1.0 / (1 << 53)))
    return out
