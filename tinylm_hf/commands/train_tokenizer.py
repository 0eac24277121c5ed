"""`tinylm train-tokenizer`: train a tokenizer on text files and save a Hugging Face tokenizer folder."""

from __future__ import annotations

import argparse

from ..fileio import check_output_folder, seal_folder
from ..tokenization import EOS_TOKEN, train_tokenizer
from ..tokenization.train_tokenizer import MASK_TOKEN, PAD_TOKEN

HELP = "train a byte-level BPE tokenizer and save a Hugging Face tokenizer folder"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--input", nargs="+", required=True, help="UTF-8 text file(s) to train on")
    parser.add_argument("--vocab-size", type=int, required=True, help="final vocabulary size, bytes and specials included")
    parser.add_argument(
        "--special-token", action="append", dest="special_tokens", default=None,
        help=f'special token (repeatable; default "{EOS_TOKEN}"). "{EOS_TOKEN}" (else the first) becomes '
        f'eos/bos/unk; "{PAD_TOKEN}" becomes pad if given, else pad = eos; "{MASK_TOKEN}" becomes the mask token '
        "(masked-LM pretraining)",
    )
    parser.add_argument("--out", required=True, help="output folder (created; must not be a file)")
    parser.add_argument("--num-workers", type=int, default=None, help="processes for pre-tokenization (default: CPU count)")
    parser.add_argument("--pattern", default="gpt2", help='pre-tokenization regex: "gpt2" (default), "gpt4" or a custom regex')
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar over merges")


def run(args: argparse.Namespace) -> int:
    check_output_folder(args.out)
    tokenizer = train_tokenizer(args.input, args.vocab_size, args.special_tokens or [EOS_TOKEN], pattern=args.pattern,
                                num_workers=args.num_workers, progress=not args.no_progress)
    saved = tokenizer.save_pretrained(args.out)
    seal_folder(args.out)
    print(f"saved a {len(tokenizer)}-token tokenizer ({len(tokenizer.bpe.merges)} merges) to {args.out}: "
          f"{', '.join(sorted({p.rsplit('/', 1)[-1] for p in saved}))}")
    return 0
