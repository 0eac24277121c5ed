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
    from transformers import TextStreamer

    check_sampling(temperature, top_p, top_k, max_new_tokens)
    ids = tokenizer(prompt, add_special_tokens=False, split_special_tokens=not allow_special)["input_ids"]
    context = getattr(model.config, "max_position_embeddings", None)
    check_prompt_fits(len(ids), context)
    if seed is not None:
        torch.manual_seed(seed)
    options: dict[str, Any] = {"do_sample": temperature > 0}
    if temperature > 0:
        options |= {"temperature": temperature, "top_p": top_p if top_p is not None else 1.0,
                    "top_k": top_k if top_k is not None else 0}
    streamer = TextStreamer(tokenizer, skip_prompt=True, skip_special_tokens=True) if stream else None
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
    return new_ids, tokenizer.decode(new_ids, skip_special_tokens=True)
