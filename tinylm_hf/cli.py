"""The `tinylm` command line: a thin map from flags onto the package's functions."""

from __future__ import annotations

import argparse
import sys

from .tokenization.tokenizer_cli import add_train_tokenizer_parser


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tinylm", description=__doc__)
    subparsers = parser.add_subparsers(dest="command", required=True)
    from .evaluation.perplexity import add_eval_parser
    from .export import add_export_parser
    from .generation_cli import add_generate_parser
    from .hub import add_push_parser
    from .quickstart import add_quickstart_parser
    from .training.data import add_prepare_parser
    from .training.loop import add_train_parser

    add_train_tokenizer_parser(subparsers)
    add_prepare_parser(subparsers)
    add_train_parser(subparsers)
    add_quickstart_parser(subparsers)
    add_generate_parser(subparsers)
    add_eval_parser(subparsers)
    add_push_parser(subparsers)
    add_export_parser(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
