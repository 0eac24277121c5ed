"""Causal language modelling: next-token prediction on windows of the prepared token arrays (a decoder,
TinyLMForCausalLM); each evaluation also samples a continuation of `sample_prompt`. Its batches are
`(input_ids, labels)`, scored by the cross-entropy on the labels (the base's step loss); its card reports perplexity
and bits per byte.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from ..batches import batch_from_starts
from ..config import TrainConfig
from ..data import TrainingData
from ..validation import evaluate, sample_completion
from .base import Objective, data_tokenizer_dir
from .sections import CausalLMSection

if TYPE_CHECKING:
    from ..run.summary import RunSummary

SAMPLE_PROMPT_WORDS = 4  # the opening words of the validation text that a causal run's samples continue


def opening_words(tokenizer: Any, val: Any, words: int = SAMPLE_PROMPT_WORDS) -> str:
    """The first `words` words of the validation text (decoded from its first tokens): a prompt in the corpus's
    own language and register, whatever the corpus is."""
    text = tokenizer.decode([int(i) for i in val[: 16 * words]], skip_special_tokens=True)
    return " ".join(text.split()[:words])


class CausalLM(Objective):
    """Next-token prediction (TinyLMForCausalLM); evaluations also sample from `sample_prompt`."""

    section = CausalLMSection

    def __init__(self, config: TrainConfig, data: TrainingData, sample_tokenizer: Any = None) -> None:
        super().__init__(config, data)
        self.sample_tokenizer = sample_tokenizer
        self.sample_prompt = config.sample_prompt
        if sample_tokenizer is not None and not self.sample_prompt:
            self.sample_prompt = opening_words(sample_tokenizer, data.val)

    @classmethod
    def open(cls, config: TrainConfig, data: TrainingData, *, main: bool) -> CausalLM:
        tokenizer_dir = data_tokenizer_dir(config, data)
        if not (main and config.sample_tokens and tokenizer_dir and Path(tokenizer_dir).is_dir()):
            return cls(config, data)
        from ...tokenizer_loading import load_tokenizer

        return cls(config, data, load_tokenizer(tokenizer_dir))

    @staticmethod
    def model_class() -> type:
        from ...modeling import TinyLMForCausalLM

        return TinyLMForCausalLM

    def micro_batch(self, sampler: torch.Generator, size: int, rows: slice, device: torch.device,
                    seed: tuple[int, ...]) -> tuple[torch.Tensor, torch.Tensor]:
        starts = self.window_starts(sampler, size)
        return batch_from_starts(self.data.train, starts[rows], self.config.context_length, device)

    def evaluate(self, model: torch.nn.Module, batch_size: int, device: torch.device,
                 autocast: contextlib.AbstractContextManager) -> dict[str, Any]:
        config = self.config
        result: dict[str, Any] = evaluate(model, self.data.val, batch_size, config.context_length, device,
                                          config.eval_iters, self.data.bytes_per_token, autocast)
        if self.sample_tokenizer is not None:
            result["sample_prompt"] = self.sample_prompt
            result["sample"] = sample_completion(model, self.sample_tokenizer, self.sample_prompt,
                                                 config.sample_tokens)
        return result

    @classmethod
    def describe_objective(cls, summary: RunSummary) -> str:
        return "causal language modelling (next-token prediction)"
