"""`tinylm export-gguf`: one GGUF file (llama architecture, tokenizer embedded) for llama.cpp, Ollama, LM Studio."""

from __future__ import annotations

import argparse

HELP = "write a GGUF file for llama.cpp / Ollama / LM Studio"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from ..publish.export_gguf import DTYPES

    parser.add_argument("dir", help="TinyLM folder written by save_pretrained")
    parser.add_argument("out", help="output .gguf file (must not exist unless --overwrite)")
    parser.add_argument("--dtype", default="f16", choices=DTYPES,
                        help="storage of the weight matrices (norms stay f32); default f16")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing output file")
    parser.add_argument("--trust-remote-code", action="store_true",
                        help="allow running the folder's own *.py files (only for folders you trust)")


def run(args: argparse.Namespace) -> int:
    from ..publish import export_gguf

    out = export_gguf(args.dir, args.out, dtype=args.dtype, overwrite=args.overwrite,
                      trust_remote_code=args.trust_remote_code)
    print(f"wrote {out} ({out.stat().st_size:,} bytes, {args.dtype})")
    return 0
