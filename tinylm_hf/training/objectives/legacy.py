"""The objectives that came before the `objectives` package, kept whole here until each moves to its own module.

`CausalLM` predicts the next token (a decoder); `MaskedLM` predicts masked tokens (an encoder, BERT's objective);
`SupervisedFineTuning` predicts the assistant's turns of conversations (chat fine-tuning);
`SequenceClassification` predicts a text's label (a head on a pretrained TinyLM). Each batch is
`(input_ids, labels[, attention_mask])` (labels of -100 are not predicted), scored by the step's cross-entropy.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..batches import batch_from_starts
from ..classification_data import ClassificationData, epoch_indices, open_classification_data
from ..config import TrainConfig
from ..data import TrainingData
from ..masking import MLMCollator
from ..mlm_data import StaticMasks, iter_mlm_eval_batches, mask_windows, static_windows
from ..sft_data import (
    CHAT_TOKENIZER_DIR,
    ConversationData,
    conversation_rows,
    iter_conversation_batches,
    open_conversation_data,
)
from ..validation import evaluate, evaluate_classifier, evaluate_masked_lm, sample_completion, sample_reply
from .base import Objective, data_tokenizer_dir


SAMPLE_PROMPT_WORDS = 4  # the opening words of the validation text that a causal run's samples continue
CHAT_SAMPLE_PROMPT = "Hello!"  # what a chat run's samples answer unless `sample_prompt` says otherwise


def opening_words(tokenizer: Any, val: Any, words: int = SAMPLE_PROMPT_WORDS) -> str:
    """The first `words` words of the validation text (decoded from its first tokens): a prompt in the corpus's
    own language and register, whatever the corpus is."""
    text = tokenizer.decode([int(i) for i in val[: 16 * words]], skip_special_tokens=True)
    return " ".join(text.split()[:words])


class CausalLM(Objective):
    """Next-token prediction (TinyLMForCausalLM); evaluations also sample from `sample_prompt`."""

    name = "clm"

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


class MaskedLM(Objective):
    """Masked-token prediction (TinyLMForMaskedLM), masked by `MLMCollator` or by masks stored with the data.

    Dynamic masks are drawn for the whole global micro-batch from a generator seeded by the micro-batch's
    `seed`, so resumed and multi-process runs mask exactly as one uninterrupted process would.
    """

    name = "mlm"
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
            raise FileNotFoundError(f"objective mlm needs the data's tokenizer folder ({tokenizer_dir}); "
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


class SupervisedFineTuning(Objective):
    """Chat fine-tuning (TinyLMForCausalLM): the next-token loss on the assistant's tokens only, one conversation a
    row (`sft_data`); evaluations also answer `sample_prompt` sent as a user message.

    Conversations are drawn uniformly by the run's sampler, so resumed and multi-process runs see exactly the
    rows of one uninterrupted process.
    """

    name = "sft"
    published_as = "chat model"
    extends_vocabulary = True
    data: ConversationData

    @classmethod
    def open_data(cls, config: TrainConfig) -> ConversationData:
        """The chat tokenizer and the tokenized conversations of `config.conversations`."""
        return open_conversation_data(config)

    @classmethod
    def open(cls, config: TrainConfig, data: TrainingData, *, main: bool) -> SupervisedFineTuning:
        """Save the tokenizer into the run when the chat tokens were added to it here; say what the data holds."""
        if not isinstance(data, ConversationData):
            raise TypeError("objective sft trains on conversations: load them with SupervisedFineTuning.open_data")
        if main:
            if data.extended:
                data.tokenizer.save_pretrained(Path(config.out_dir) / CHAT_TOKENIZER_DIR)
            train, val = data.train_conversations, data.val_conversations
            print(f"sft: {len(train)} training and {len(val)} validation conversations, {train.target_tokens:,} "
                  f"assistant tokens to learn; {train.dropped + val.dropped} longer than the context left out")
        return cls(config, data)

    @staticmethod
    def model_class() -> type:
        return CausalLM.model_class()

    def micro_batch(self, sampler: torch.Generator, size: int, rows: slice, device: torch.device,
                    seed: tuple[int, ...]) -> tuple[torch.Tensor, torch.Tensor]:
        indices = torch.randint(0, len(self.data.train_conversations), (size,), generator=sampler)
        x, y = conversation_rows(self.data.train_conversations, indices.tolist(), self.data.pad_id, "cpu")
        return x[rows].to(device), y[rows].to(device)

    def evaluate(self, model: torch.nn.Module, batch_size: int, device: torch.device,
                 autocast: contextlib.AbstractContextManager) -> dict[str, Any]:
        """Loss and perplexity on the validation conversations' assistant tokens (and a sampled reply)."""
        batches = iter_conversation_batches(self.data.val_conversations, batch_size, self.data.pad_id)
        scores = evaluate_masked_lm(model, batches, device, self.config.eval_iters, autocast)
        result: dict[str, Any] = {"val_loss": scores["val_loss"], "val_perplexity": scores["val_perplexity"]}
        if self.config.sample_tokens:
            result["sample_prompt"] = self.config.sample_prompt or CHAT_SAMPLE_PROMPT
            result["sample"] = sample_reply(model, self.data.tokenizer, result["sample_prompt"],
                                            self.config.sample_tokens)
        return result


class SequenceClassification(Objective):
    """Text classification (TinyLMForSequenceClassification on the `init_from` folder) on labelled texts.

    Examples are drawn in epochs (`classification_data.epoch_indices`, seeded by the run's seed), each
    micro-batch padded to its longest text; an evaluation scores every validation example (loss, accuracy,
    macro-F1).
    """

    name = "seq_cls"
    published_as = "classifier"

    def __init__(self, config: TrainConfig, data: ClassificationData) -> None:
        super().__init__(config, data)
        self.task = data.task

    @classmethod
    def open_data(cls, config: TrainConfig) -> ClassificationData:
        return open_classification_data(config)

    @classmethod
    def open(cls, config: TrainConfig, data: ClassificationData, *, main: bool) -> SequenceClassification:
        task = data.task
        if main:
            print(f"{task.train_examples} training examples of {data.provenance.name}, {task.validation_examples} "
                  f"for validation ({task.validation}); labels {', '.join(task.labels)}; majority-class "
                  f"baseline {task.majority_accuracy:.3f}")
        return cls(config, data)

    @staticmethod
    def model_class() -> type:
        from ...modeling import TinyLMForSequenceClassification

        return TinyLMForSequenceClassification

    def model_options(self) -> dict[str, Any]:
        return self.data.model_options()

    def micro_batch(self, sampler: torch.Generator, size: int, rows: slice, device: torch.device,
                    seed: tuple[int, ...]) -> tuple[torch.Tensor, ...]:
        run_seed, step, micro_step = seed
        first = (step * self.config.grad_accum_steps + micro_step) * size  # examples drawn before this micro-batch
        indices = epoch_indices(len(self.data.train), first, size, run_seed)
        batch = self.data.train.batch(indices, self.data.pad_id)  # padded to the longest text of all ranks' rows
        return tuple(t[rows].to(device) for t in batch)

    def evaluate(self, model: torch.nn.Module, batch_size: int, device: torch.device,
                 autocast: contextlib.AbstractContextManager) -> dict[str, Any]:
        return evaluate_classifier(model, self.data.val.batches(batch_size, self.data.pad_id), device, autocast)

