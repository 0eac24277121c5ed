"""Talking to a chat model: a conversation kept within the model's context, each reply streamed as it comes.

The prompt is the whole conversation rendered by the tokenizer's chat template with the assistant's turn
opened (`apply_chat_template(..., add_generation_prompt=True)`: the ids `pipeline("text-generation")` and
llama.cpp's `phi3` formatting give too). When it no longer leaves room for a reply in the model's context,
the oldest exchanges are dropped (a system message stays). Generation stops at the end-of-turn token.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from typing import Any

import torch

from .generation import ContinuationStreamer, check_sampling, sampling_options
from .tokenization.chat_template import CHAT_TOKENS, has_chat_format, stop_token_ids
from .training.config import check_seed

EXIT_WORDS = ("/exit", "/quit")
RESET_WORD = "/reset"


class ChatSession:
    """One conversation with a model: `reply(text)` adds the user's message and the model's answer to `messages`."""

    def __init__(self, model: Any, tokenizer: Any, *, system: str | None = None, max_new_tokens: int = 200,
                 temperature: float = 0.8, top_p: float | None = None, top_k: int | None = 50,
                 seed: int | None = None) -> None:
        check_sampling(temperature, top_p, top_k, max_new_tokens)
        if not has_chat_format(tokenizer):
            raise ValueError("this model's tokenizer has no chat template and chat tokens: fine-tune it with "
                             "`tinylm sft` first (or use `tinylm generate` for plain text)")
        self.model, self.tokenizer = model, tokenizer
        self.system = system
        self.max_new_tokens = max_new_tokens
        self.options = sampling_options(temperature, top_p, top_k)
        self.context = model.config.max_position_embeddings
        self.stop_ids = stop_token_ids(tokenizer)
        self.messages: list[dict[str, str]] = []
        self.reset()
        if seed is not None:
            torch.manual_seed(check_seed(seed))

    def reset(self) -> None:
        """Forget the conversation (the system message stays)."""
        self.messages = [{"role": "system", "content": self.system}] if self.system else []

    def prompt_ids(self) -> list[int]:
        """The conversation's prompt ids, the oldest exchanges dropped until a full reply fits the context."""
        while True:
            ids = list(self.tokenizer.apply_chat_template(self.messages, add_generation_prompt=True,
                                                          return_dict=True)["input_ids"])
            first = 1 if self.system else 0
            if len(ids) + self.max_new_tokens <= self.context or len(self.messages) - first <= 1:
                break
            del self.messages[first:first + 2]  # the oldest user message and its reply
        if len(ids) >= self.context:
            self.messages.pop()
            raise ValueError(f"the message makes a prompt of {len(ids)} tokens, but the model's context is "
                             f"{self.context}: say it in fewer words")
        return ids

    def reply(self, text: str, *, stream: bool = False) -> str:
        """The model's answer to the user's `text` (printed as it is generated with `stream`)."""
        forged = [token for token in CHAT_TOKENS if token in text]
        if forged:
            raise ValueError(f"the message contains {forged[0]!r}, a control token of the chat format: rephrase it")
        self.messages.append({"role": "user", "content": text})
        ids = self.prompt_ids()
        streamer = ContinuationStreamer(self.tokenizer, ids) if stream else None
        x = torch.tensor([ids], device=next(self.model.parameters()).device)
        with torch.no_grad():
            out = self.model.generate(input_ids=x, attention_mask=torch.ones_like(x), streamer=streamer,
                                      max_new_tokens=min(self.max_new_tokens, self.context - len(ids)),
                                      eos_token_id=self.stop_ids, pad_token_id=self.stop_ids[-1], **self.options)
        if streamer is not None:
            streamer.flush()
        answer = self.tokenizer.decode(out[0, len(ids):].tolist(), skip_special_tokens=True).strip()
        self.messages.append({"role": "assistant", "content": answer})
        return answer


def chat_loop(session: ChatSession, lines: Iterable[str], *, prompt: Callable[[], None] = lambda: None,
              say: Callable[[str], None] = print) -> int:
    """Answer each line of `lines` (streamed to stdout) until one of EXIT_WORDS or the end; returns replies given.

    `prompt` is called before each line is read (the REPL's "you> "); `RESET_WORD` starts the conversation anew.
    """
    replies = 0
    prompt()
    for line in lines:
        text = line.strip()
        if text in EXIT_WORDS:
            break
        if text == RESET_WORD:
            session.reset()
            say("[conversation reset]")
        elif text:
            print("model> ", end="", flush=True)
            try:
                session.reply(text, stream=True)
                replies += 1
            except ValueError as err:
                say(f"\n[{err}]")
        prompt()
    return replies


def read_lines() -> Iterable[str]:
    """Lines typed at the terminal (or piped in), up to end of input."""
    return iter(sys.stdin.readline, "")
