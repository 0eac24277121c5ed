"""`tinylm chat`: talk to a chat model folder (one fine-tuned with `tinylm sft`) at the terminal.

Each reply is streamed as it is generated. Every exchange that fits the model's context with room for a reply
stays; when the oldest must go, one line says so. Messages are plain text: typing `<|end|>` sends those
characters, never the control token. Type /reset to start anew, /exit (or end the input) to leave.
"""

from __future__ import annotations

import argparse
import sys

HELP = "talk to a chat model folder (fine-tuned with `tinylm sft`), replies streamed"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("dir", help="chat model folder (with chat_template.jinja), e.g. runs/chat/hf")
    parser.add_argument("--system", default=None, help="a system message opening the conversation (plain text; refused when too long for the context)")
    parser.add_argument("--max-new-tokens", type=int, default=200, help="tokens per reply at most (default: 200)")
    parser.add_argument("--temperature", type=float, default=0.8, help="0 = greedy (default: 0.8)")
    parser.add_argument("--top-p", type=float, default=None, help="nucleus sampling mass in (0, 1]")
    parser.add_argument("--top-k", type=int, default=50, help="sample among the k likeliest tokens (0 = off; default 50)")
    parser.add_argument("--seed", type=int, default=None, help="seed the sampling")
    parser.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N, mps or auto")
    parser.add_argument("--threads", type=int, default=None, help="CPU threads (default: physical cores)")
    parser.add_argument("--trust-remote-code", action="store_true",
                        help="allow running the folder's own *.py files (only for folders you trust)")


def run(args: argparse.Namespace) -> int:
    from ..chat import ChatSession, chat_loop, read_lines
    from ..publish import load_folder
    from ..runtime import resolve_device, set_threads

    set_threads(args.threads)
    model, tokenizer = load_folder(args.dir, trust_remote_code=args.trust_remote_code)
    session = ChatSession(model.to(resolve_device(args.device)).eval(), tokenizer, system=args.system,
                          max_new_tokens=args.max_new_tokens, temperature=args.temperature, top_p=args.top_p,
                          top_k=args.top_k, seed=args.seed)
    print(f"chatting with {args.dir} (context {session.context} tokens); /reset starts anew, /exit leaves")
    chat_loop(session, read_lines(), prompt=lambda: print("you> ", end="", flush=True),
              echo=not sys.stdin.isatty())  # piped in: the terminal did not show the user's lines
    print()
    return 0
