"""Supervised fine-tuning of a chat model: the next-token loss on the assistant's turns of conversations only, one
conversation a row (`sft_data`: the chat tokenizer, tokenized conversations and padded rows). Its batches are
`(input_ids, labels)`, labels -100 outside the assistant's tokens; each evaluation also answers `sample_prompt`
sent as a user message. Its published folder is a chat model, and its card quotes the record of the model it was
fine-tuned from.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from ..config import TrainConfig
from ..data import TrainingData
from ..validation import evaluate_masked_lm, sample_reply
from .base import Objective
from .causal_lm import CausalLM
from .sections import SFTSection
from .sft_data import (
    CHAT_TOKENIZER_DIR,
    ConversationData,
    conversation_rows,
    iter_conversation_batches,
    open_conversation_data,
)

if TYPE_CHECKING:
    from ..run.summary import RunSummary

CHAT_SAMPLE_PROMPT = "Hello!"  # what a chat run's samples answer unless `sample_prompt` says otherwise


def sample_chat_reply(model: torch.nn.Module, tokenizer: Any, config: TrainConfig) -> dict[str, Any]:
    """An evaluation's sample of a chat model: its reply to `sample_prompt` (else `CHAT_SAMPLE_PROMPT`) sent as the
    user's message, with the prompt; nothing when `sample_tokens` is 0."""
    if not config.sample_tokens:
        return {}
    prompt = config.sample_prompt or CHAT_SAMPLE_PROMPT
    return {"sample_prompt": prompt, "sample": sample_reply(model, tokenizer, prompt, config.sample_tokens)}


class SupervisedFineTuning(Objective):
    """Chat fine-tuning (TinyLMForCausalLM): the next-token loss on the assistant's tokens only, one conversation a
    row (`sft_data`); evaluations also answer `sample_prompt` sent as a user message.

    Conversations are drawn uniformly by the run's sampler, so resumed and multi-process runs see exactly the
    rows of one uninterrupted process.
    """

    section = SFTSection
    published_as = "chat model"
    extends_vocabulary = True
    keeps_base_record = True
    data: ConversationData

    @classmethod
    def open_data(cls, config: TrainConfig) -> ConversationData:
        """The chat tokenizer and the tokenized conversations of `config.conversations`."""
        return open_conversation_data(config)

    @classmethod
    def open(cls, config: TrainConfig, data: TrainingData, *, main: bool) -> SupervisedFineTuning:
        """Save the tokenizer into the run when the chat tokens were added to it here; say what the data holds."""
        if not isinstance(data, ConversationData):
            raise TypeError(f"objective {cls.name} trains on conversations: load them with "
                            "SupervisedFineTuning.open_data")
        if main:
            if data.extended:
                data.tokenizer.save_pretrained(Path(config.out_dir) / CHAT_TOKENIZER_DIR)
            train, val = data.train_conversations, data.val_conversations
            print(f"{cls.name}: {len(train)} training and {len(val)} validation conversations, "
                  f"{train.target_tokens:,} assistant tokens to learn; {train.dropped + val.dropped} longer than the "
                  "context left out")
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
        return {"val_loss": scores["val_loss"], "val_perplexity": scores["val_perplexity"],
                **sample_chat_reply(model, self.data.tokenizer, self.config)}

    @classmethod
    def describe_objective(cls, summary: RunSummary) -> str:
        return ("supervised fine-tuning on conversations: the next-token loss on the assistant's turns only, their "
                "end-of-turn token included (system and user text, role markers and padding are not learned)")

    @classmethod
    def describe_training(cls, summary: RunSummary, lines: list[str], *, base: str | None, optimizer: str,
                          run_lines: list[str]) -> str:
        """What the chat model was fine-tuned from and on (the card writer adds its base model's own record)."""
        data = summary.data
        head = (f"Fine-tuned {f'from `{base}` ' if base else ''}with `tinylm sft` (supervised fine-tuning; hand-written "
                f"{optimizer.removeprefix('hand-written ')}, cosine schedule with warm-up, gradient clipping) on "
                f"{data.documents:,} conversations of {data.name} ({data.train_tokens:,} tokens).")
        return head + "\n\n" + "\n".join(lines)

    @classmethod
    def card_results(cls, summary: RunSummary) -> dict[str, Any] | None:
        return {}  # a loss on the assistant's tokens only is no language-modelling metric
