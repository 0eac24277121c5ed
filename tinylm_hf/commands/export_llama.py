"""`tinylm export-llama`: write a plain Llama folder (LlamaForCausalLM, or the task head's Llama class) that needs
neither remote code nor tinylm_hf."""

from __future__ import annotations

import argparse

HELP = "write a plain Llama folder (LlamaForCausalLM or a Llama task head; no remote code)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("dir", help="TinyLM folder written by save_pretrained")
    parser.add_argument("out", help="output folder (must not exist or be empty, nor contain DIR)")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing output folder")
    parser.add_argument("--trust-remote-code", action="store_true",
                        help="allow running the folder's own *.py files (only for folders you trust)")


def run(args: argparse.Namespace) -> int:
    from ..publish import export_llama
    from ..training.model_folder import read_json

    out = export_llama(args.dir, args.out, overwrite=args.overwrite, trust_remote_code=args.trust_remote_code)
    architecture = read_json(out / "config.json")["architectures"][0]
    print(f"wrote a {architecture} folder to {out}: {', '.join(sorted(p.name for p in out.iterdir()))}")
    return 0
