"""Text generation from a loaded model and tokenizer, with the checks a command line needs.

Prompts are plain text by default: special-token text in them (`<|endoftext|>`) is encoded as the
characters it spells, not as the control token, unless `allow_special=True`. Generation longer than
the model's context slides the window (the model then sees only the most recent tokens) and says
so through `notify`, rather than stopping silently.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

from .tokenization.plain_text import encode_plain


def check_sampling(temperature: float, top_p: float | None, top_k: int | None, max_new_tokens: int) -> None:
    """ValueError for a temperature that is negative or not finite, top_p outside (0, 1], a negative top_k."""
    if not isinstance(temperature, (int, float)) or not math.isfinite(temperature) or temperature < 0:
        raise ValueError(f"temperature must be a finite number >= 0 (0 = greedy), got {temperature!r}")
    if top_p is not None and not (0.0 < top_p <= 1.0):
        raise ValueError(f"top_p must be in (0, 1], got {top_p!r}")
    if top_k is not None and top_k < 0:
        raise ValueError(f"top_k must be >= 0 (0 = off), got {top_k!r}")
    if max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens!r}")


def check_prompt_fits(prompt_length: int, context_length: int | None) -> None:
    """Raise ValueError when the prompt is empty or leaves no room for a new token in the context."""
    if prompt_length == 0:
        raise ValueError("the prompt is empty; give some text with --prompt")
    if context_length is not None and prompt_length >= context_length:
        raise ValueError(
            f"the prompt is {prompt_length} tokens but the model's context is {context_length} tokens; "
            "shorten the prompt"
        )


def sampling_options(temperature: float, top_p: float | None, top_k: int | None) -> dict[str, Any]:
    """`generate` keyword arguments for greedy decoding (temperature 0) or sampling with these settings."""
    if temperature == 0:
        return {"do_sample": False}
    return {"do_sample": True, "temperature": temperature, "top_p": top_p if top_p is not None else 1.0,
            "top_k": top_k if top_k is not None else 0}


def generate_text(
    model: Any,
    tokenizer: Any,
    prompt: str,
    *,
    max_new_tokens: int = 100,
    temperature: float = 1.0,
    top_p: float | None = None,
    top_k: int | None = None,
    seed: int | None = None,
    stream: bool = False,
    allow_special: bool = False,
    notify: Callable[[str], None] | None = None,
) -> tuple[list[int], str]:
    """Generate one continuation of `prompt`; temperature 0 means greedy. Returns (new ids, new text).

    Stops at the tokenizer's eos token or after `max_new_tokens`. Past the model's context the window
    slides: each further chunk is generated from the last half-context of tokens (`notify` is told).
    """
    check_sampling(temperature, top_p, top_k, max_new_tokens)
    ids = tokenizer(prompt, add_special_tokens=False)["input_ids"] if allow_special else encode_plain(tokenizer, prompt)
    context = getattr(model.config, "max_position_embeddings", None)
    check_prompt_fits(len(ids), context)
    if seed is not None:
        torch.manual_seed(seed)
    options = sampling_options(temperature, top_p, top_k)
    streamer = ContinuationStreamer(tokenizer, ids) if stream else None
    eos = tokenizer.eos_token_id if tokenizer.eos_token_id is not None else model.config.eos_token_id
    device = next(model.parameters()).device
    all_ids, new_ids = list(ids), []
    while len(new_ids) < max_new_tokens:
        window = all_ids if context is None or len(all_ids) < context else all_ids[-(context // 2):]
        if window is not all_ids and notify is not None:
            notify(f"[context of {context} tokens full: sliding the window, the model now sees the last "
                   f"{len(window)} tokens]")
        room = max_new_tokens - len(new_ids) if context is None else min(max_new_tokens - len(new_ids), context - len(window))
        x = torch.tensor([window], device=device)
        with torch.no_grad():
            out = model.generate(input_ids=x, attention_mask=torch.ones_like(x), max_new_tokens=room,
                                 eos_token_id=eos, pad_token_id=eos if eos is not None else 0, streamer=streamer,
                                 **options)
        chunk = out[0, len(window):].tolist()
        new_ids += chunk
        all_ids += chunk
        if not chunk or (eos is not None and chunk[-1] == eos):
            break
    if streamer is not None:
        streamer.flush()
    return new_ids, continuation_text(tokenizer, ids, new_ids)


def continuation_text(tokenizer: Any, prompt_ids: list[int], new_ids: list[int]) -> str:
    """The text `new_ids` add after the prompt, decoded in the prompt's context.

    Decoding the new ids alone is wrong for SentencePiece-style and WordPiece tokenizers: a leading
    `▁word` loses its space (taken for the dummy prefix) and a `##` piece its word.
    """
    before = tokenizer.decode(prompt_ids, skip_special_tokens=True)
    after = tokenizer.decode(list(prompt_ids) + list(new_ids), skip_special_tokens=True)
    return after[len(before):] if after.startswith(before) else tokenizer.decode(new_ids, skip_special_tokens=True)


class ContinuationStreamer:
    """A `generate(streamer=...)` that prints new text as it comes, decoded after the text before it.

    transformers' `TextStreamer` decodes the new tokens alone (see `continuation_text`). This one
    decodes the last few printed ids together with the new ones and prints the difference (the
    incremental detokenisation of text-generation-inference), holding back a partial UTF-8 character;
    each step decodes a handful of ids whatever the length so far. Each `generate` call first passes
    its input ids, which are skipped (the sliding window calls `generate` again on ids already printed).
    """

    CONTEXT_IDS = 5  # already printed ids decoded again before the new ones

    def __init__(self, tokenizer: Any, prompt_ids: list[int]) -> None:
        self.tokenizer, self.ids = tokenizer, list(prompt_ids)
        self.prefix_offset = max(0, len(self.ids) - self.CONTEXT_IDS)  # ids[prefix_offset:read_offset]: context
        self.read_offset = len(self.ids)  # ids from here on are not printed yet
        self.input_next = True

    def _decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=True)

    def put(self, value: torch.Tensor) -> None:
        if self.input_next:
            self.input_next = False
            return
        self.ids += value.reshape(-1).tolist()
        before = self._decode(self.ids[self.prefix_offset:self.read_offset])
        text = self._decode(self.ids[self.prefix_offset:])
        if len(text) > len(before) and not text.endswith("\ufffd"):  # \ufffd: an incomplete UTF-8 sequence
            print(text[len(before):], end="", flush=True)
            self.prefix_offset, self.read_offset = self.read_offset, len(self.ids)

    def end(self) -> None:
        self.input_next = True

    def flush(self) -> None:
        """Print what is left (a final partial character) and end the line."""
        before = self._decode(self.ids[self.prefix_offset:self.read_offset])
        print(self._decode(self.ids[self.prefix_offset:])[len(before):], flush=True)
