"""Masked language modelling: BERT's objective, predicting masked tokens of windows of the prepared token arrays
(an encoder, TinyLMForMaskedLM). Tokens are masked by `masking.MLMCollator` (dynamic, whole-word, n-gram or span
masking), or read from the masks `tinylm prepare --mlm-static` stored beside the data (`mlm_data`). Its batches are
`(input_ids, labels)`, labels -100 where no token is masked; its published folder is an encoder, which does not
generate.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from ..batches import batch_from_starts
from ..config import TrainConfig
from ..data import TrainingData
from ..validation import evaluate_masked_lm
from .base import Objective, data_tokenizer_dir
from .masking import MLMCollator
from .mlm_data import StaticMasks, iter_mlm_eval_batches, mask_windows, static_windows
from .sections import MaskedLMSection

if TYPE_CHECKING:
    from ..run.summary import RunSummary

MASKING_NAMES = {
    "static": "static masking (BERT: masked once when the data was prepared)",
    "dynamic": "dynamic masking (RoBERTa: a new mask every time a sequence is seen)",
    "whole_word": "whole-word masking (all pieces of a word masked together)",
    "ngram": "n-gram masking (ERNIE: 1-3 word n-grams, shorter ones more likely)",
    "span": "span masking (SpanBERT: geometric span lengths, p = 0.2, clipped at 10 words)",
}


class MaskedLM(Objective):
    """Masked-token prediction (TinyLMForMaskedLM), masked by `MLMCollator` or by masks stored with the data.

    Dynamic masks are drawn for the whole global micro-batch from a generator seeded by the micro-batch's
    `seed`, so resumed and multi-process runs mask exactly as one uninterrupted process would.
    """

    section = MaskedLMSection
    published_as = "encoder"

    def __init__(self, config: TrainConfig, data: TrainingData, collator: MLMCollator,
                 train_masks: StaticMasks | None = None, val_masks: StaticMasks | None = None) -> None:
        super().__init__(config, data)
        self.masking = config.masking
        self.collator = collator
        self.train_masks, self.val_masks = train_masks, val_masks  # the stored masks of static masking

    @classmethod
    def open(cls, config: TrainConfig, data: TrainingData, *, main: bool) -> MaskedLM:
        """The collator for `config.masking` (the data's tokenizer decides words and the mask token)."""
        from ...tokenizer_loading import load_tokenizer

        tokenizer_dir = data_tokenizer_dir(config, data)
        if not tokenizer_dir or not Path(tokenizer_dir).is_dir():
            raise FileNotFoundError(f"objective {cls.name} needs the data's tokenizer folder ({tokenizer_dir}); "
                                    "pass --tokenizer-dir")
        tokenizer = load_tokenizer(tokenizer_dir)
        collator = MLMCollator(tokenizer, config.masking, mlm_probability=config.mlm_probability, seed=config.seed)
        if config.masking != "static":
            return cls(config, data, collator)
        p = config.mlm_probability
        return cls(config, data, collator, StaticMasks.open(config.data_dir, "train", data.train, mlm_probability=p),
                   StaticMasks.open(config.data_dir, "val", data.val, mlm_probability=p))

    @staticmethod
    def model_class() -> type:
        from ...modeling import TinyLMForMaskedLM

        return TinyLMForMaskedLM

    def micro_batch(self, sampler: torch.Generator, size: int, rows: slice, device: torch.device,
                    seed: tuple[int, ...]) -> tuple[torch.Tensor, torch.Tensor]:
        starts, context_length = self.window_starts(sampler, size), self.config.context_length
        if self.train_masks is not None:
            return static_windows(self.data.train, self.train_masks, starts[rows], context_length, device)
        x, _ = batch_from_starts(self.data.train, starts, context_length, "cpu")
        x, y = mask_windows(x, self.collator, np.random.default_rng(seed))
        return x[rows].to(device), y[rows].to(device)

    def evaluate(self, model: torch.nn.Module, batch_size: int, device: torch.device,
                 autocast: contextlib.AbstractContextManager) -> dict[str, Any]:
        config = self.config
        batches = iter_mlm_eval_batches(self.data.val, batch_size, config.context_length, self.collator,
                                        config.seed, self.val_masks)
        return evaluate_masked_lm(model, batches, device, config.eval_iters, autocast)

    @classmethod
    def describe_objective(cls, summary: RunSummary) -> str:
        """Masked language modelling, with the masking strategy and probability."""
        probability = summary.train_config.get("mlm_probability", 0.15)
        masking = MASKING_NAMES.get(summary.masking or "", summary.masking or "unknown masking")
        return (f"masked language modelling (mlm) with {masking}; {probability:.0%} of the tokens chosen, "
                "replaced by the mask token 80%, a random token 10%, kept 10%")

    @classmethod
    def card_results(cls, summary: RunSummary) -> dict[str, Any] | None:
        return {}  # a masked-token loss is no language-modelling metric
