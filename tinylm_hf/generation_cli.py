"""`tinylm generate`: load a model folder with the Auto classes and stream samples to the terminal."""

from __future__ import annotations

import argparse
from typing import Any

import torch


def check_prompt_fits(prompt_length: int, context_length: int | None) -> None:
    """Raise ValueError when the prompt (plus at least one new token) does not fit the context."""
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
) -> tuple[list[int], str]:
    """Generate one continuation of `prompt`; temperature 0 means greedy. Returns (new ids, new text).

    Stops at the tokenizer's eos token or after `max_new_tokens`, and never past the model's context.
    """
    from transformers import TextStreamer

    ids = tokenizer(prompt, add_special_tokens=False, return_tensors="pt")["input_ids"]
    context = getattr(model.config, "max_position_embeddings", None)
    check_prompt_fits(ids.shape[1], context)
    if context is not None:
        max_new_tokens = min(max_new_tokens, context - ids.shape[1])
    if seed is not None:
        torch.manual_seed(seed)
    sampling = temperature > 0
    options: dict[str, Any] = {"do_sample": sampling}
    if sampling:
        options |= {"temperature": temperature, "top_p": top_p if top_p is not None else 1.0,
                    "top_k": top_k if top_k is not None else 0}
    streamer = TextStreamer(tokenizer, skip_prompt=True, skip_special_tokens=True) if stream else None
    eos = tokenizer.eos_token_id
    with torch.no_grad():
        out = model.generate(
            input_ids=ids.to(next(model.parameters()).device), attention_mask=torch.ones_like(ids),
            max_new_tokens=max_new_tokens, eos_token_id=eos, pad_token_id=eos if eos is not None else 0,
            streamer=streamer, **options,
        )
    new_ids = out[0, ids.shape[1] :].tolist()
    return new_ids, tokenizer.decode(new_ids, skip_special_tokens=True)


def _run_generate(args: argparse.Namespace) -> int:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if args.num_samples < 1 or args.max_new_tokens < 1:
        raise ValueError("--num-samples and --max-new-tokens must be >= 1")
    tokenizer = AutoTokenizer.from_pretrained(args.dir, trust_remote_code=True)
    model = AutoModelForCausalLM.from_pretrained(args.dir, trust_remote_code=True).eval()
    for i in range(args.num_samples):
        if args.num_samples > 1:
            print(f"--- sample {i + 1} ---")
        print(args.prompt, end="", flush=True)
        generate_text(
            model, tokenizer, args.prompt, max_new_tokens=args.max_new_tokens, temperature=args.temperature,
            top_p=args.top_p, top_k=args.top_k, seed=None if args.seed is None else args.seed + i, stream=True,
        )
    return 0


def add_generate_parser(subparsers: argparse._SubParsersAction) -> None:
    """Register `tinylm generate DIR --prompt TEXT [...]`."""
    parser = subparsers.add_parser("generate", help="sample text from a model folder, streamed as it is produced")
    parser.add_argument("dir", help="model folder (or Hub id) loadable with the Auto classes")
    parser.add_argument("--prompt", required=True)
    parser.add_argument("--max-new-tokens", type=int, default=100)
    parser.add_argument("--temperature", type=float, default=1.0, help="0 = greedy")
    parser.add_argument("--top-p", type=float, default=None)
    parser.add_argument("--top-k", type=int, default=None)
    parser.add_argument("--seed", type=int, default=None, help="sample i uses seed + i")
    parser.add_argument("--num-samples", type=int, default=1)
    parser.set_defaults(func=_run_generate)
