"""Supervised fine-tuning data: conversations rendered by the tokenizer's chat template, tokenized with the
assistant's tokens marked, and batched one conversation per row.

A conversation is rendered by `tokenizer.chat_template` (its markers control tokens, each message's content
plain text: `tokenization.plain_text.encode_chat`); its `{% generation %}` spans (each assistant turn's
text and its end-of-turn token) are the tokens the model learns to say. Labels are the next token where that
token is the assistant's and -100 elsewhere, so the loss ignores system and user text, role markers and
padding, and the end-of-turn token is learned. Each row holds one conversation, right-padded: with causal
attention no token sees the padding after it, so no attention crosses from one conversation to another.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ...corpus.conversations import Conversation
from ...corpus.token_files import token_digest, tokenizer_fingerprint
from ...modeling.loss_tinylm import IGNORE_INDEX
from ...tokenization.chat_template import CHAT_TEMPLATE, add_chat_tokens, has_chat_format
from ...tokenization.plain_text import encode_chat
from ..config import TrainConfig
from ..data import TrainingData
from ..run.summary import DataProvenance


def tokenize_conversation(tokenizer: Any, messages: Conversation) -> tuple[list[int], list[int]]:
    """(input ids, assistant mask: 1 where the assistant speaks) of one conversation under the chat template.

    The chat markers are the template's control tokens and each message's content is plain text
    (`encode_chat`): a content that spells `<|end|>` or `<|user|>` teaches those characters, never the
    control tokens. Without such text the ids are `tokenizer.apply_chat_template(messages)`'s and the mask
    is what transformers' `return_assistant_tokens_mask=True` gives a fast tokenizer.
    """
    chat = encode_chat(tokenizer, messages)
    return chat.ids, chat.mask


@dataclass
class TokenizedConversations:
    """Conversations as flat token arrays: conversation i is `ids[starts[i]:starts[i + 1]]`."""

    ids: np.ndarray
    """int64: every conversation's tokens, one after another."""
    labels: np.ndarray
    """int64: labels[t] is the token after t when the assistant says it (`ids[t + 1]`), else -100."""
    starts: np.ndarray
    """int64, (n + 1,): where each conversation starts, then the total length."""
    dropped: int = 0
    """Conversations left out because they do not fit the context."""

    def __len__(self) -> int:
        return len(self.starts) - 1

    @property
    def target_tokens(self) -> int:
        """Tokens the model learns to predict (assistant tokens)."""
        return int((self.labels != IGNORE_INDEX).sum())


def tokenize_conversations(tokenizer: Any, conversations: Sequence[Conversation],
                           context_length: int) -> TokenizedConversations:
    """Tokenize `conversations`, leaving out those whose inputs (all tokens but the last) exceed `context_length`.

    A conversation cut to the context would teach the model replies that never end, so it is dropped instead,
    as soon as its encoding passes the context (a long conversation costs no more than a short one).
    """
    ids, labels, lengths = [], [], []
    for messages in conversations:
        chat = encode_chat(tokenizer, messages, max_tokens=context_length + 1)  # None: too long, left unfinished
        if chat is None:
            continue
        tokens, mask = chat.ids, chat.mask
        ids.append(np.asarray(tokens, dtype=np.int64))
        next_ids = np.asarray(tokens[1:] + [IGNORE_INDEX], dtype=np.int64)
        labels.append(np.where(np.asarray(mask[1:] + [0]) == 1, next_ids, IGNORE_INDEX))
        lengths.append(len(tokens))
    if not ids:
        raise ValueError(f"no conversation fits context_length {context_length}: raise --context-length "
                         "(up to the model's max_position_embeddings) or shorten the conversations")
    starts = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    return TokenizedConversations(np.concatenate(ids), np.concatenate(labels), starts,
                                  dropped=len(conversations) - len(ids))


def conversation_rows(data: TokenizedConversations, indices: Sequence[int], pad_id: int,
                      device: str | torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """(inputs, labels) of the conversations `indices`, one a row, right-padded to the longest (pad label -100)."""
    spans = [(int(data.starts[i]), int(data.starts[i + 1]) - 1) for i in indices]  # the last token is no input
    width = max(end - start for start, end in spans)
    x = np.full((len(spans), width), pad_id, dtype=np.int64)
    y = np.full((len(spans), width), IGNORE_INDEX, dtype=np.int64)
    for row, (start, end) in enumerate(spans):
        x[row, : end - start] = data.ids[start:end]
        y[row, : end - start] = data.labels[start:end]
    return torch.from_numpy(x).to(device), torch.from_numpy(y).to(device)


def iter_conversation_batches(data: TokenizedConversations, batch_size: int,
                              pad_id: int) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """Every conversation once, in order, `batch_size` at a time (CPU tensors): the validation walk."""
    for first in range(0, len(data), batch_size):
        yield conversation_rows(data, range(first, min(first + batch_size, len(data))), pad_id, "cpu")


def split_validation(conversations: list[Conversation], share: float = 0.05) -> tuple[list[Conversation], list[Conversation]]:
    """(train, validation): the trailing `share` of the conversations (at least one) is held out."""
    if len(conversations) < 2:
        raise ValueError("need at least two conversations to hold one out for validation; pass a validation file")
    n_val = min(max(1, round(len(conversations) * share)), len(conversations) - 1)
    return conversations[:-n_val], conversations[-n_val:]


@dataclass
class ConversationData(TrainingData):
    """A fine-tuning run's data: `train`/`val` are the token arrays of the tokenized conversations below."""

    train_conversations: TokenizedConversations
    val_conversations: TokenizedConversations
    tokenizer: Any
    """The chat tokenizer (the chat tokens added when the model's tokenizer lacked them)."""
    extended: bool
    """True when the chat tokens were added here: the tokenizer must be saved with the run (`CHAT_TOKENIZER_DIR`)."""

    @property
    def pad_id(self) -> int:
        """The id padding rows hold (never a target, never attended to by a real token)."""
        return padding_id(self.tokenizer)


def padding_id(tokenizer: Any) -> int:
    """The id right-padded rows hold: the pad token's, else the end-of-text token's (never a target)."""
    return next((i for i in (tokenizer.pad_token_id, tokenizer.eos_token_id) if i is not None), 0)


CHAT_TOKENIZER_DIR = "chat_tokenizer"  # in out_dir: the model's tokenizer with the chat tokens added (run.folder.RUN_OUTPUTS)


def open_conversation_data(config: TrainConfig) -> ConversationData:
    """Load the chat tokenizer and the conversations of an sft run, tokenized, before any model is built."""
    from ...corpus.conversations import load_conversations

    tokenizer, folder, extended = load_chat_tokenizer(config)
    train = load_conversations(config.conversations)
    val = load_conversations(config.val_conversations) if config.val_conversations else None
    if val is None:
        train, val = split_validation(train)
    train_tokens = tokenize_conversations(tokenizer, train, config.context_length)
    val_tokens = tokenize_conversations(tokenizer, val, config.context_length)
    if extended:
        folder = str(Path(config.out_dir) / CHAT_TOKENIZER_DIR)
    provenance = DataProvenance(
        input_files=[os.path.basename(config.conversations)],
        val_files=[os.path.basename(config.val_conversations)] if config.val_conversations else [],
        train_tokens=len(train_tokens.ids), val_tokens=len(val_tokens.ids), documents=len(train_tokens),
        tokenizer_dir=folder, tokenizer_fingerprint=tokenizer_fingerprint(tokenizer),
        token_digest=f"{token_digest(train_tokens.ids)}+{token_digest(val_tokens.ids)}",
    )
    return ConversationData(provenance=provenance, vocab_size=len(tokenizer), eos_id=tokenizer.eos_token_id,
                            train=train_tokens.ids, val=val_tokens.ids, bytes_per_token=None,
                            train_conversations=train_tokens, val_conversations=val_tokens, tokenizer=tokenizer,
                            extended=extended)


def load_chat_tokenizer(config: TrainConfig) -> tuple[Any, str, bool]:
    """(tokenizer with the chat format, its folder, whether the chat tokens were added here).

    The tokenizer is `tokenizer_dir`'s, else the `init_from` model folder's. Only the model's own tokenizer
    may gain chat tokens here (the model's embeddings then grow to fit): a separate `tokenizer_dir` must
    already have them, since it is what the run publishes.
    """
    from ...tokenizer_loading import load_tokenizer

    folder = config.tokenizer_dir or config.init_from
    if not folder:
        raise ValueError("objective sft needs a tokenizer: pass --init-from (a model folder with its tokenizer) "
                         "or --tokenizer-dir")
    tokenizer = copy.deepcopy(load_tokenizer(folder))  # the loader's copy is shared: never change it
    if has_chat_format(tokenizer):
        tokenizer.chat_template = CHAT_TEMPLATE  # the same text (an editor's newline, no generation markers): ours marks the turns
        return tokenizer, str(folder), False
    if config.tokenizer_dir:
        raise ValueError(f"the tokenizer in {folder} has no chat tokens and template: train one with "
                         "`tinylm train-tokenizer --chat`, or leave out --tokenizer-dir to add them to the "
                         "--init-from model's tokenizer")
    add_chat_tokens(tokenizer)
    return tokenizer, str(folder), True
