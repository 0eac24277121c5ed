"""TinyLMTokenizerFast: the same byte-level BPE as `TinyLMTokenizer`, run by the Rust `tokenizers` library.

Loaded by its own class, `TinyLMTokenizerFast.from_pretrained(DIR)`: it is deliberately not registered
with `AutoTokenizer` (in transformers 5 a registered fast class wins over the slow one, and the
from-scratch `TinyLMTokenizer` is what `AutoTokenizer` must return). Only the "gpt2" pre-tokenization
pattern can be mirrored: `tokenizers`' ByteLevel pre-tokenizer hard-codes GPT-2's regex.

This file imports only same-folder siblings: transformers copies it flat for `trust_remote_code`.
"""

from __future__ import annotations

import json
from typing import Any

from transformers import PreTrainedTokenizerFast

from .byte_level_backend import build_byte_level_bpe, check_fast_pattern

ENDOFTEXT = "<|endoftext|>"


def _read_vocab(vocab: dict[str, int] | str) -> dict[str, int]:
    if isinstance(vocab, dict):
        return vocab
    with open(vocab, encoding="utf-8") as f:
        return json.load(f)


def _read_merges(merges: list | str) -> list[tuple[str, str]]:
    if not isinstance(merges, str):
        return [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in merges]
    with open(merges, encoding="utf-8") as f:
        lines = [line.rstrip("\n") for line in f]
    return [tuple(line.split(" ")) for line in lines if line and not line.startswith("#version")]


class TinyLMTokenizerFast(PreTrainedTokenizerFast):
    """Fast twin of `TinyLMTokenizer`: ids equal on the same folder, special tokens included.

    Built from `vocab` + `merges` (what transformers 5 extracts from `tokenizer.json` when loading a
    folder) or from `vocab_file` + `merges_file`.
    """

    vocab_files_names = {"vocab_file": "vocab.json", "merges_file": "merges.txt", "tokenizer_file": "tokenizer.json"}
    model_input_names = ["input_ids", "attention_mask"]
    slow_tokenizer_class = None

    def __init__(
        self,
        vocab: dict[str, int] | str | None = None,
        merges: list | str | None = None,
        vocab_file: str | None = None,
        merges_file: str | None = None,
        errors: str = "replace",
        unk_token: str | None = ENDOFTEXT,
        bos_token: str | None = ENDOFTEXT,
        eos_token: str | None = ENDOFTEXT,
        pad_token: str | None = ENDOFTEXT,
        pattern: str = "gpt2",
        **kwargs: Any,
    ) -> None:
        check_fast_pattern(pattern)
        vocab = vocab if vocab is not None else vocab_file
        merges = merges if merges is not None else merges_file
        if vocab is None or merges is None:
            raise ValueError("TinyLMTokenizerFast needs `vocab` and `merges` (or `vocab_file` and `merges_file`)")
        kwargs.pop("tokenizer_object", None)
        kwargs.pop("tokenizer_file", None)
        backend = build_byte_level_bpe(_read_vocab(vocab), _read_merges(merges))
        kwargs.setdefault("clean_up_tokenization_spaces", False)
        super().__init__(
            tokenizer_object=backend,
            errors=errors,
            unk_token=unk_token,
            bos_token=bos_token,
            eos_token=eos_token,
            pad_token=pad_token,
            pattern=pattern,
            **kwargs,
        )
