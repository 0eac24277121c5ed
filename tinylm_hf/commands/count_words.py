"""`tinylm count-words`: count the words of one shard as a trainer would, for training on many machines.

Count every shard (a Slurm array, `datasets.map`, Spark or Ray tasks), then
`tinylm train-tokenizer --counts shard-*.json ...` sums them and trains exactly as on the whole text.
"""

from __future__ import annotations

import argparse

HELP = "count one shard's words for a tokenizer trainer (sum shards with train-tokenizer --counts)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from ..tokenization.families import FAMILIES

    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--input", nargs="+", help="the shard's text files or globs")
    source.add_argument("--dataset", help="a `datasets` dataset NAME or NAME:SPLIT (or local data folder), streamed")
    parser.add_argument("--text-column", default="text", help="the text column with --dataset (default: text)")
    parser.add_argument("--algorithm", choices=list(FAMILIES), default="bpe",
                        help="whose words to count (default: bpe)")
    parser.add_argument("--special-token", action="append", dest="special_tokens", default=None,
                        help="special token cut out before counting (repeatable; the algorithm's defaults otherwise)")
    parser.add_argument("--pattern", default="gpt2", help='bpe pre-tokenization regex: "gpt2", "gpt4" or a regex')
    parser.add_argument("--lowercase", action="store_true", help="wordpiece: lower-case and strip accents")
    parser.add_argument("--out", required=True, help="the counts' JSON file")


def run(args: argparse.Namespace) -> int:
    from ..corpus.sources import expand_inputs, iter_dataset_texts
    from ..fileio import check_not_an_input
    from ..tokenizer_training import count_words, save_word_counts
    from ..tokenization.families import FAMILIES

    specials = list(FAMILIES[args.algorithm].special_tokens) if args.special_tokens is None else args.special_tokens
    if args.dataset:
        inputs = iter_dataset_texts(args.dataset, args.text_column)
    else:
        inputs = expand_inputs(args.input)
        check_not_an_input(args.out, inputs)
    counts = count_words(inputs, algorithm=args.algorithm, special_tokens=specials,
                         pattern=args.pattern, lowercase=args.lowercase)
    path = save_word_counts(counts, args.out, algorithm=args.algorithm, pattern=args.pattern,
                            lowercase=args.lowercase, special_tokens=specials)
    print(f"counted {sum(counts.values()):,} words ({len(counts):,} distinct) into {path}")
    return 0
