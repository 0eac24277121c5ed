"""`tinylm train-tokenizer`: train a byte-level BPE on a text file and save it as a Hugging Face folder.

The folder (vocab.json, merges.txt, tokenizer.json, tokenizer_config.json and the tokenizer's code)
loads with `AutoTokenizer.from_pretrained(DIR)` (with `trust_remote_code=True` where tinylm_hf is not
installed) and with `TinyLMTokenizerFast.from_pretrained(DIR)`.
"""

from __future__ import annotations

import argparse
import os
import tempfile

from .bpe import BPETokenizer
from .pretokenize import check_special_tokens
from .tokenization_tinylm import ENDOFTEXT, TinyLMTokenizer

PAD = "<|pad|>"


def add_train_tokenizer_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register the `train-tokenizer` subcommand."""
    parser = subparsers.add_parser(
        "train-tokenizer",
        help="train a byte-level BPE tokenizer and save a Hugging Face tokenizer folder",
        description=__doc__,
    )
    parser.add_argument("--input", required=True, help="UTF-8 text file to train on")
    parser.add_argument("--vocab-size", type=int, required=True, help="final vocabulary size, bytes and specials included")
    parser.add_argument(
        "--special-token",
        action="append",
        dest="special_tokens",
        default=None,
        help=f'special token (repeatable; default "{ENDOFTEXT}"). "{ENDOFTEXT}" (else the first) becomes '
        f'eos/bos/unk; "{PAD}" becomes pad if given, else pad = eos',
    )
    parser.add_argument("--out", required=True, help="output folder")
    parser.add_argument("--num-workers", type=int, default=None, help="processes for pre-tokenization (default: CPU count)")
    parser.add_argument("--pattern", default="gpt2", help='pre-tokenization regex: "gpt2" (default), "gpt4" or a custom regex')
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar over merges")
    parser.set_defaults(func=run_train_tokenizer)
    return parser


def run_train_tokenizer(args: argparse.Namespace) -> int:
    """Train with `train_bpe`, then save vocab/merges and the HF tokenizer files into `args.out`."""
    from .bpe_train import train_bpe

    specials = check_special_tokens(args.special_tokens or [ENDOFTEXT])
    vocab, merges = train_bpe(
        args.input,
        args.vocab_size,
        specials,
        num_workers=args.num_workers,
        pattern=args.pattern,
        progress=not args.no_progress,
    )
    tokenizer = build_hf_tokenizer(vocab, merges, specials, pattern=args.pattern)
    tokenizer.save_pretrained(args.out)
    print(f"saved a {len(tokenizer)}-token tokenizer ({len(merges)} merges) to {args.out}")
    return 0


def build_hf_tokenizer(
    vocab: dict[int, bytes],
    merges: list[tuple[bytes, bytes]],
    special_tokens: list[str],
    *,
    pattern: str = "gpt2",
) -> TinyLMTokenizer:
    """A `TinyLMTokenizer` over trained `vocab`/`merges`, with every special token registered as special."""
    special_tokens = check_special_tokens(special_tokens)
    if not special_tokens:
        raise ValueError(f'at least one special token is needed to serve as eos/pad, e.g. "{ENDOFTEXT}"')
    eos = ENDOFTEXT if ENDOFTEXT in special_tokens else special_tokens[0]
    pad = PAD if PAD in special_tokens else eos
    extra = [s for s in special_tokens if s not in (eos, pad)]
    with tempfile.TemporaryDirectory() as tmp:
        BPETokenizer(vocab, merges, special_tokens, pattern=pattern).save(tmp)
        return TinyLMTokenizer(
            os.path.join(tmp, "vocab.json"),
            os.path.join(tmp, "merges.txt"),
            unk_token=eos,
            bos_token=eos,
            eos_token=eos,
            pad_token=pad,
            pattern=pattern,
            extra_special_tokens=extra,
        )


__all__ = ["add_train_tokenizer_parser", "build_hf_tokenizer", "run_train_tokenizer"]
