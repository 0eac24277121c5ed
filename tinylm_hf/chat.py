"""Talking to a chat model: a conversation kept within the model's context, each reply streamed as it comes.

The prompt is the whole conversation rendered by the tokenizer's chat template with the assistant's turn
opened: the chat markers are control tokens and each message is plain text (`encode_chat`), so a user who
types `<|end|>` or `<|endoftext|>` sends those characters, never the control tokens. For text that spells
no special token these are the ids `apply_chat_template(..., add_generation_prompt=True)`,
`pipeline("text-generation")` and llama.cpp's `phi3` formatting give. Every exchange that fits stays: the
oldest are dropped (a system message stays) only when the prompt would leave a reply less than
`reply_room` tokens, and `drop_notice` says so. Generation stops at the end-of-turn token.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from typing import Any

import torch

from .generation import ContinuationStreamer, check_sampling, sampling_options
from .tokenization.chat_template import has_chat_format, stop_token_ids
from .tokenization.plain_text import encode_chat
from .training.config import check_seed

EXIT_WORDS = ("/exit", "/quit")
RESET_WORD = "/reset"
REPLY_SHARE = 4  # a reply is promised max_new_tokens, or a quarter of the context when that is less


class ChatSession:
    """One conversation with a model: `reply(text)` adds the user's message and the model's answer to `messages`."""

    def __init__(self, model: Any, tokenizer: Any, *, system: str | None = None, max_new_tokens: int = 200,
                 temperature: float = 0.8, top_p: float | None = None, top_k: int | None = 50,
                 seed: int | None = None) -> None:
        check_sampling(temperature, top_p, top_k, max_new_tokens)
        check_chat_format(tokenizer)
        self.model, self.tokenizer = model, tokenizer
        self.system = system
        self.max_new_tokens = max_new_tokens
        self.options = sampling_options(temperature, top_p, top_k)
        self.context = model.config.max_position_embeddings
        self.reply_room = max(1, min(max_new_tokens, self.context // REPLY_SHARE))
        """Tokens a reply is always left: old exchanges are dropped before the prompt leaves it fewer."""
        self.stop_ids = stop_token_ids(tokenizer)
        self.messages: list[dict[str, str]] = []
        self.dropped = 0
        """Exchanges the last prompt dropped to fit the context."""
        self.reset()
        self._check_system()
        if seed is not None:
            torch.manual_seed(check_seed(seed))

    def reset(self) -> None:
        """Forget the conversation (the system message stays)."""
        self.messages = [{"role": "system", "content": self.system}] if self.system else []

    def _check_system(self) -> None:
        """Refuse a system message that leaves no room for a message and a reply in the context."""
        if not self.system:
            return
        opening = self._encode([*self.messages, {"role": "user", "content": ""}])
        if len(opening) + self.reply_room > self.context:
            raise ValueError(f"the system message (--system) is {len(opening)} tokens with the chat markers, but the "
                             f"model's context is {self.context} and a reply needs {self.reply_room}: shorten it")

    def _encode(self, messages: list[dict[str, str]]) -> list[int]:
        return encode_chat(self.tokenizer, messages, add_generation_prompt=True).ids

    def prompt_ids(self) -> list[int]:
        """The conversation's prompt ids, the oldest exchanges dropped while a reply would get under `reply_room`."""
        first = 1 if self.system else 0
        self.dropped = 0
        ids = self._encode(self.messages)
        while len(ids) + self.reply_room > self.context and len(self.messages) - first > 1:
            del self.messages[first:first + 2]  # the oldest user message and its reply
            self.dropped += 1
            ids = self._encode(self.messages)
        if len(ids) >= self.context:
            self.messages.pop()
            raise ValueError(f"the message makes a prompt of {len(ids)} tokens, but the model's context is "
                             f"{self.context}: say it in fewer words")
        return ids

    def drop_notice(self) -> str | None:
        """One line saying that the last prompt dropped old exchanges, or None."""
        if not self.dropped:
            return None
        return (f"[{self.dropped} oldest exchange{'s' if self.dropped > 1 else ''} left the model's {self.context}-token "
                f"context: it no longer sees {'them' if self.dropped > 1 else 'it'}]")

    def ask(self, text: str) -> list[int]:
        """Add the user's `text` to the conversation; returns the prompt ids (see `prompt_ids`)."""
        self.messages.append({"role": "user", "content": text})
        return self.prompt_ids()

    def answer(self, ids: list[int], *, stream: bool = False) -> str:
        """The model's answer to the prompt `ids` (printed as it is generated with `stream`), added to `messages`."""
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

    def reply(self, text: str, *, stream: bool = False) -> str:
        """The model's answer to the user's `text` (printed as it is generated with `stream`)."""
        return self.answer(self.ask(text), stream=stream)


def check_chat_format(tokenizer: Any) -> None:
    """Refuse a tokenizer without TinyLM's chat tokens and a template that renders its chat format."""
    if has_chat_format(tokenizer):
        return
    if tokenizer.chat_template:
        raise ValueError("the tokenizer's chat_template.jinja does not render TinyLM's chat format "
                         "(or its chat tokens are missing): restore the file from the `tinylm sft` run that wrote it")
    raise ValueError("this model's tokenizer has no chat template and chat tokens: fine-tune it with "
                     "`tinylm sft` first (or use `tinylm generate` for plain text)")


def chat_loop(session: ChatSession, lines: Iterable[str], *, prompt: Callable[[], None] = lambda: None,
              say: Callable[[str], None] = print, echo: bool = False) -> int:
    """Answer each line of `lines` (streamed to stdout) until one of EXIT_WORDS or the end; returns replies given.

    `prompt` is called before each line is read (the REPL's "you> "); `RESET_WORD` starts the conversation anew.
    `echo` prints each line after the prompt, for input the terminal did not show (piped in), so that the output
    reads as the conversation.
    """
    replies = 0
    prompt()
    for line in lines:
        if echo:
            print(line.rstrip("\r\n"), flush=True)
        text = line.strip()
        if text in EXIT_WORDS:
            break
        if text == RESET_WORD:
            session.reset()
            say("[conversation reset]")
        elif text:
            try:
                ids = session.ask(text)
            except ValueError as err:
                say(f"[{err}]")
            else:
                if session.drop_notice():
                    say(session.drop_notice())
                print("model> ", end="", flush=True)
                session.answer(ids, stream=True)
                replies += 1
        prompt()
    return replies


def read_lines() -> Iterable[str]:
    """Lines typed at the terminal (or piped in), up to end of input."""
    return iter(sys.stdin.readline, "")
