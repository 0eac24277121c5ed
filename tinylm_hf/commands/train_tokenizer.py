"""`tinylm train-tokenizer`: train a tokenizer of any family in the family table on files, a `datasets` dataset
or summed word counts, and save a Hugging Face tokenizer folder."""

from __future__ import annotations

import argparse
from pathlib import Path

HELP = "train a tokenizer of one family (--algorithm) and save a Hugging Face tokenizer folder"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from ..tokenization.chat_template import CHAT_TOKENS
    from ..tokenization.families import FAMILIES
    from ..tokenizer_training.train_tokenizer import MASK_TOKEN, PAD_TOKEN
    from ..tokenization.wordpiece.train import WORDPIECE_SCORES

    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--input", nargs="+", help="UTF-8 text files or globs (data/*.txt) to train on")
    source.add_argument("--dataset", help="a `datasets` dataset NAME or NAME:SPLIT, streamed")
    source.add_argument("--counts", nargs="+", help="word-count JSON files from `tinylm count-words`, summed")
    parser.add_argument("--algorithm", choices=list(FAMILIES), default="bpe", help="tokenizer family (default: bpe)")
    parser.add_argument("--vocab-size", type=int, required=True, help="final vocabulary size, specials included")
    parser.add_argument(
        "--special-token", action="append", dest="special_tokens", default=None,
        help="special token (repeatable). Defaults: "
        + ", ".join(f"{name} {list(family.special_tokens)}" for name, family in FAMILIES.items())
        + " (byte-level BPE's first also becomes eos/bos/unk; the sentencepiece-style cores add <unk>, <s>, </s>)"
        + f". In every family {MASK_TOKEN!r} becomes the mask token (masked-LM pretraining) and {PAD_TOKEN!r} pad",
    )
    parser.add_argument("--chat", action="store_true",
                        help=f"also train the chat tokens {', '.join(CHAT_TOKENS)} as special tokens and save the chat "
                             "template, for `tinylm sft` and `tinylm chat`")
    parser.add_argument("--masked-lm", action="store_true",
                        help=f"also train the mask token {MASK_TOKEN!r} beside the family's special tokens (or those "
                             "given), for masked-LM pretraining (`tinylm train --objective mlm`)")
    parser.add_argument("--text-column", default="text", help="the text column with --dataset (default: text)")
    parser.add_argument("--pattern", default="gpt2", help='bpe pre-tokenization regex: "gpt2", "gpt4" or a regex')
    parser.add_argument("--lowercase", action="store_true", help="wordpiece: lower-case and strip accents (uncased)")
    defaults = {f.name: f.byte_fallback for f in FAMILIES.values() if f.byte_fallback is not None}
    fallback = parser.add_mutually_exclusive_group()
    fallback.add_argument("--byte-fallback", dest="byte_fallback", action="store_const", const=True, default=None,
                          help=f"{', '.join(defaults)}: map characters no piece covers to <0x..> byte tokens "
                               f"(default: {', '.join(f'{name} {on}' for name, on in defaults.items())})")
    fallback.add_argument("--no-byte-fallback", dest="byte_fallback", action="store_const", const=False,
                          help="map them to <unk> instead")
    parser.add_argument("--wordpiece-score", choices=list(WORDPIECE_SCORES), default=None,
                        help=f"wordpiece's merge rule (default: {FAMILIES['wordpiece'].score}, as tokenizers' "
                             "WordPieceTrainer; likelihood: Schuster & Nakajima; pmi: freq(ab)/(freq(a)*freq(b)), "
                             "which compresses 2-2.6x worse)")
    parser.add_argument("--out", required=True, help="output folder: new, empty, or an earlier tokenizer folder "
                        "(replaced whole); written beside and renamed into place")
    parser.add_argument("--num-workers", type=int, default=None, help="processes counting BPE pre-tokens (default: CPUs)")
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar over merges")


def tokenizer_folder_files() -> frozenset[str]:
    """What a saved tokenizer folder may hold: its files, and our remote code that save_pretrained copies."""
    from ..remote_code import remote_code_files, remote_ref
    from ..tokenization.families import FAMILIES

    code = remote_code_files(remote_ref(cls) for f in FAMILIES.values() for cls in (f.slow, f.fast))
    return frozenset({"tokenizer_config.json", "special_tokens_map.json", "added_tokens.json", "chat_template.jinja",
                      *(name for f in FAMILIES.values() for name in f.files), *code})


def check_tokenizer_out(out: str) -> bool:
    """Whether `out` holds an earlier tokenizer (only tokenizer files) to replace; a folder holding anything else
    is refused (FileExistsError), so that files we did not write are never deleted."""
    from ..fileio import check_output_folder

    folder = check_output_folder(out)
    if folder.is_symlink():
        raise FileExistsError(f"--out {folder} is a symlink: give the folder it points to, or a new folder")
    if not folder.is_dir():
        return False
    known = tokenizer_folder_files()
    others = sorted(p.name for p in folder.iterdir() if p.name not in known or not p.is_file() or p.is_symlink())
    if others:
        raise FileExistsError(f"--out {folder} holds files that are not a tokenizer's ({', '.join(others[:5])}): "
                              "choose a new or empty folder")
    return True


def with_extra_specials(specials: list[str] | None, algorithm: str, *, chat: bool, masked_lm: bool) -> list[str] | None:
    """The special tokens to train: those given (else the family's defaults, None) plus the chat tokens (`--chat`)
    and the mask token (`--masked-lm`) when asked and not given already."""
    from ..tokenization.chat_template import CHAT_TOKENS
    from ..tokenization.families import FAMILIES
    from ..tokenizer_training.train_tokenizer import MASK_TOKEN

    extra = [*(CHAT_TOKENS if chat else ()), *((MASK_TOKEN,) if masked_lm else ())]
    if not extra:
        return specials
    base = list(FAMILIES[algorithm].special_tokens if specials is None else specials)
    return base + [token for token in extra if token not in base]


def run(args: argparse.Namespace) -> int:
    from ..corpus.sources import expand_inputs, iter_dataset_texts
    from ..fileio import staged_folder
    from ..registration import register
    from ..tokenization.chat_template import add_chat_tokens
    from ..tokenizer_training import sum_word_counts, train_tokenizer

    replace = check_tokenizer_out(args.out)
    if args.counts:
        inputs = sum_word_counts(args.counts)
    elif args.dataset:
        inputs = iter_dataset_texts(args.dataset, args.text_column)
    else:
        inputs = expand_inputs(args.input)
    specials = with_extra_specials(args.special_tokens, args.algorithm, chat=args.chat, masked_lm=args.masked_lm)
    tokenizer = train_tokenizer(inputs, args.vocab_size, specials, algorithm=args.algorithm,
                                pattern=args.pattern, lowercase=args.lowercase, byte_fallback=args.byte_fallback,
                                wordpiece_score=args.wordpiece_score, num_workers=args.num_workers,
                                progress=not args.no_progress)
    if args.chat:
        add_chat_tokens(tokenizer)
    register()  # the folder always carries its tokenizer code (auto_map), whatever this process imported before
    with staged_folder(args.out, replace=replace) as stage:
        tokenizer.save_pretrained(stage)
        written = sorted(p.name for p in stage.iterdir())
    print(f"saved a {len(tokenizer)}-token {args.algorithm} tokenizer ({type(tokenizer).__name__}) to {args.out}: "
          f"{', '.join(written)}")
    return 0
