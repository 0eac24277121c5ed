"""`tinylm serve`: a model folder over an OpenAI-compatible API (chat and text completions, streamed or not).

Our own small FastAPI app serves the folder, loaded and checked as `tinylm generate` loads it: the chat
template's markers are the only control tokens, a chat model stops at `<|end|>`, and the name and address printed
at start are what the server answers to. Needs fastapi, uvicorn and psutil (openai is the client):
pip install 'tinylm-hf[serve]'. Stop it with Ctrl-C.
"""

from __future__ import annotations

import argparse

HELP = "serve a model folder over an OpenAI-compatible API"


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

    def started(server) -> None:  # noqa: ANN001 (a serving.Server)
        print(f"serving {args.dir} on {server.url} (model name: {server.model_name}); Ctrl-C stops", flush=True)

    serve(args.dir, host=args.host, port=args.port, device=args.device,
          attn_implementation=args.attn_implementation, continuous_batching=args.continuous_batching,
          cb_num_blocks=args.cb_num_blocks, cb_max_batch_tokens=args.cb_max_batch_tokens,
          cb_block_size=args.cb_block_size, on_start=started)
    return 0
