"""The `tinylm` subcommands: one module each, mapping flags to one library call and printing its result.

Each module has `HELP` (one line), `add_arguments(parser)` and `run(args) -> int`. Library code
never parses flags; these modules never hold logic the library lacks.
"""
