"""The `tinylm` subcommands: one module each, mapping flags to one library call and printing its result.

Each module has `HELP` (one line), `add_arguments(parser)` and `run(args) -> int`. Library code
never parses flags; these modules never hold logic the library lacks.
"""

COMMANDS = {  # command name -> its module here
    "train-tokenizer": "train_tokenizer",
    "count-words": "count_words",
    "prepare": "prepare",
    "train": "train",
    "sft": "sft",
    "dpo": "dpo",
    "finetune": "finetune",
    "quickstart": "quickstart",
    "generate": "generate",
    "chat": "chat",
    "eval": "eval",
    "push": "push",
    "export-llama": "export_llama",
    "export-gguf": "export_gguf",
    "lm-eval-tasks": "lm_eval_tasks",
    "serve": "serve",
}
