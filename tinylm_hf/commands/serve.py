"""`tinylm serve`: a model folder over an OpenAI-compatible API (chat and text completions, streamed or not).

The server is transformers' own (`transformers serve`), started with TinyLM registered, so a TinyLM folder
serves as a Llama folder does, nothing converted: the chat template renders the prompt and a chat model stops
at `<|end|>`. Needs fastapi, uvicorn and openai: pip install 'tinylm-hf[serve]'. Stop it with Ctrl-C.
"""

from __future__ import annotations

import argparse

HELP = "serve a model folder over an OpenAI-compatible API (transformers' server)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("dir", help="model folder, e.g. runs/chat/hf")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1, this machine)")
    parser.add_argument("--port", type=int, default=8000, help="port to listen on (default: 8000)")
    parser.add_argument("--device", default="auto", help="cpu, cuda, cuda:N, mps or auto (default)")
    parser.add_argument("--attn-implementation", default=None,
                        help="eager, sdpa, flex_attention, flash_attention_2, ... (default: sdpa)")
    parser.add_argument("--continuous-batching", action="store_true",
                        help="batch concurrent requests with a paged KV cache")
    parser.add_argument("--cb-num-blocks", type=int, default=None, help="paged KV cache blocks (continuous batching)")
    parser.add_argument("--cb-max-batch-tokens", type=int, default=None,
                        help="tokens per batch at most (continuous batching)")
    parser.add_argument("--cb-block-size", type=int, default=None, help="tokens per cache block (continuous batching)")


def run(args: argparse.Namespace) -> int:
    from ..serving import serve

    print(f"serving {args.dir} on http://{args.host}:{args.port}/v1 (model name: {args.dir}); Ctrl-C stops",
          flush=True)
    serve(args.dir, host=args.host, port=args.port, device=args.device,
          attn_implementation=args.attn_implementation, continuous_batching=args.continuous_batching,
          cb_num_blocks=args.cb_num_blocks, cb_max_batch_tokens=args.cb_max_batch_tokens,
          cb_block_size=args.cb_block_size)
    return 0
