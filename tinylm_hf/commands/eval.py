"""`tinylm eval`: perplexity, cross-entropy and bits per byte of a model folder over whole texts."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HELP = "perplexity, cross-entropy and bits per byte over whole texts"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("dir", help="model folder loadable with the Auto classes")
    parser.add_argument("--input", nargs="+", help="text file(s); documents split on <|endoftext|> lines")
    parser.add_argument("--dataset", help="a `datasets` name or local data folder with a text column, optionally "
                        "NAME:SPLIT (default split: validation, else test, else train)")
    parser.add_argument("--stride", type=int, default=None, help="new tokens scored per window (default: context)")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--context-length", type=int, default=None, help="window size (default: the model's)")
    parser.add_argument("--limit", type=int, default=None, help="evaluate only the first N documents (N >= 1)")
    parser.add_argument("--whole-file", action="store_true", help="score each file as one text, unsplit")
    parser.add_argument("--out", help="write the results as JSON here (name it eval_results.json in the "
                        "model folder and `tinylm push` puts them in the card)")
    parser.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N, mps or auto")
    parser.add_argument("--threads", type=int, default=None, help="CPU threads (default: physical cores)")
    parser.add_argument("--trust-remote-code", action="store_true",
                        help="allow running the folder's own *.py files (only for folders you trust)")


def run(args: argparse.Namespace) -> int:
    from ..evaluation.perplexity import evaluate_perplexity, load_texts
    from ..fileio import check_not_an_input, make_folders, write_json_atomic
    from ..publish import load_folder
    from ..publish.folder import weights_digest
    from ..publish.model_card import EVAL_RESULTS_FILE
    from ..runtime import resolve_device, set_threads

    if args.out:  # never one of the texts or the model's files (its eval_results.json is eval's own output)
        model_files = [p for p in Path(args.dir).glob("*") if p.name != EVAL_RESULTS_FILE]
        check_not_an_input(args.out, [*(args.input or []), *model_files])
    texts = load_texts(args.input, args.dataset, split_docs=not args.whole_file, limit=args.limit)
    set_threads(args.threads)
    model, tokenizer = load_folder(args.dir, trust_remote_code=args.trust_remote_code)
    model = model.to(resolve_device(args.device))
    context = model.config.max_position_embeddings
    if args.context_length is not None and not 1 < args.context_length <= context:
        raise ValueError(f"--context-length must be in [2, {context}] (the model's context), got {args.context_length}")
    summary = evaluate_perplexity(model, tokenizer, texts, stride=args.stride, batch_size=args.batch_size,
                                  context_length=args.context_length)
    summary["dataset"] = args.dataset or ", ".join(Path(p).name for p in args.input)
    print(f"{'metric':<22}{'value':>16}")
    for key in ("perplexity", "cross_entropy", "bits_per_byte", "total_loglikelihood", "tokens", "bytes", "texts"):
        value = summary[key]
        print(f"{key:<22}{value:>16.4f}" if isinstance(value, float) else f"{key:<22}{value:>16}")
    if not summary["round_trips"]:
        print("note: this tokenizer does not give the text back exactly (e.g. WordPiece drops whitespace, <unk> "
              "drops characters): the bits per byte leave out what it dropped and do not compare with lossless "
              "tokenizers'", file=sys.stderr)
    if args.out:
        make_folders(Path(args.out).parent)
        write_json_atomic(args.out, {"model": Path(args.dir).name, "weights_digest": weights_digest(args.dir),
                                     "stride": args.stride, "summary": summary})
    return 0
