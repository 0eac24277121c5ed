"""`tinylm prepare`: tokenize text files or a `datasets` dataset into train.bin / val.bin."""

from __future__ import annotations

import argparse

from .old_flags import add_old_flags

HELP = "tokenize a corpus into train.bin / val.bin for training"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tokenizer", required=True, help="folder of a saved tokenizer (AutoTokenizer)")
    src = parser.add_mutually_exclusive_group(required=True)
    src.add_argument("--input", nargs="+", help="UTF-8 text files, or .jsonl files with a text column")
    src.add_argument("--dataset", help="a `datasets` name or local data folder (a folder is streamed, never copied)")
    val_data = parser.add_argument("--val-data", nargs="+", default=None,
                                   help="validation files (else carved off by size)")
    add_old_flags(parser, val_data, "--val-input")
    parser.add_argument("--split", default=None, help="dataset split (with --dataset)")
    parser.add_argument("--text-column", default="text", help="column holding the text (default: text)")
    parser.add_argument("--val-fraction", type=float, default=0.05, help="share of the text for validation")
    parser.add_argument("--workers", "--num-proc", dest="workers", type=int, default=None,
                        help="tokenizing threads (default: the usable CPUs)")
    parser.add_argument("--out", required=True, help="output folder")
    parser.add_argument("--mlm-static", action="store_true",
                        help="also mask the data once for masked-LM training with --masking static (BERT's static "
                        "masking: every epoch sees the same masks); the tokenizer needs a mask token")
    parser.add_argument("--mlm-probability", type=float, default=0.15, help="share of tokens masked (with --mlm-static)")
    parser.add_argument("--mlm-seed", type=int, default=0, help="seed of the static masks (with --mlm-static)")


def run(args: argparse.Namespace) -> int:
    from ..corpus import prepare_dataset
    from ..tokenizer_loading import load_tokenizer
    from ..training.objectives.mlm_data import check_static_masking, write_static_masks

    if args.mlm_static:  # the masking options are checked before train.bin / val.bin are written
        check_static_masking(load_tokenizer(args.tokenizer), mlm_probability=args.mlm_probability, seed=args.mlm_seed)
    headers = prepare_dataset(
        args.tokenizer, args.out, input_files=args.input, dataset=args.dataset, split=args.split,
        text_column=args.text_column, val_fraction=args.val_fraction, num_workers=args.workers,
        val_files=args.val_data,
    )
    for name, h in headers.items():
        how = ", ".join(f"{n:,} cut at {rule.replace('_', ' ')}" for rule, n in h.get("split_rules", {}).items())
        print(f"{name}: {h['count']:,} tokens ({h['dtype']}), {h['documents']:,} documents" + (f" ({how})" if how else ""))
    if "val_carved" in headers["train"]["source"]:
        print(f"validation: the last {headers['train']['source']['val_carved']:.0%} of the text, by size")
    print(f"wrote {args.out}/train.bin and val.bin")
    if args.mlm_static:
        masked = write_static_masks(args.out, load_tokenizer(args.tokenizer), mlm_probability=args.mlm_probability,
                                    seed=args.mlm_seed)
        print(f"static masks: {', '.join(f'{name}.masked.bin / {name}.chosen.bin' for name in masked)}")
    return 0
