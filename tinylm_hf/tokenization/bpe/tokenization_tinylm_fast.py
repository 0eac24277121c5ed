"""TinyLMTokenizerFast: the same byte-level BPE as `TinyLMTokenizer`, run by the Rust `tokenizers` library.

What `AutoTokenizer` returns for a byte-level BPE folder (its `auto_map` names this class as the fast one,
and `tinylm_hf` registers it as the fast twin of `TinyLMTokenizer`): offsets, word ids and assistant masks
come from `tokenizers`. Only the "gpt2" pre-tokenization pattern can be mirrored (`tokenizers`' ByteLevel
pre-tokenizer hard-codes GPT-2's regex): a folder saved with another pattern has no `tokenizer.json`, and
`from_pretrained` returns `TinyLMTokenizer` for it.

Saved folders carry this file flat (`remote_code.py`): it imports the package only by relative imports.
"""

from __future__ import annotations

# first: on an unsupported transformers, a remote-code folder says what it needs (compat.py)
from ...compat import require_supported_transformers  # noqa: F401

import json
import os
from typing import Any

from tokenizers import models

from .backend import base_init_kwargs, build_byte_level_bpe, check_fast_pattern
from .byte_unicode import unicode_to_bytes, unicode_to_token
from .gpt2_files import MERGES_FILE, VOCAB_FILE, read_merges_txt, read_vocab_json, write_gpt2_files
from ..pretokenize import EOS_TOKEN
from .tokenization_tinylm import TinyLMTokenizer
from ..tokenization_tinylm_base import TOKENIZER_FILE, TinyLMCoreTokenizerFast, drop_folder_kwargs

def _read_vocab(vocab: dict[str, int] | str) -> dict[str, int]:
    return vocab if isinstance(vocab, dict) else read_vocab_json(vocab)


def _read_merges(merges: list | str) -> list[tuple[str, str]]:
    if isinstance(merges, str):
        return read_merges_txt(merges)
    return [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in merges]


def _check_same_as_gpt2_files(
    vocab: dict[str, int], merges: list[tuple[str, str]], vocab_file: str | None, merges_file: str | None
) -> None:
    """A folder's tokenizer.json must hold the vocabulary and merges of its vocab.json / merges.txt:
    otherwise the slow and fast classes would give different ids for the same folder."""
    if vocab_file and os.path.isfile(vocab_file) and read_vocab_json(vocab_file) != vocab:
        raise ValueError(f"tokenizer.json disagrees with {vocab_file}: the folder holds two different vocabularies; "
                         "re-save the tokenizer")
    if merges_file and os.path.isfile(merges_file) and read_merges_txt(merges_file) != [tuple(m) for m in merges]:
        raise ValueError(f"tokenizer.json disagrees with {merges_file}: the folder holds two different merge lists; "
                         "re-save the tokenizer")


class TinyLMTokenizerFast(TinyLMCoreTokenizerFast):
    """Fast twin of `TinyLMTokenizer`: ids equal on the same folder, special tokens included.

    Built from `vocab` + `merges` (what transformers 5 extracts from `tokenizer.json` when loading a
    folder) or from `vocab_file` + `merges_file`.
    """

    vocab_files_names = {"vocab_file": VOCAB_FILE, "merges_file": MERGES_FILE, "tokenizer_file": TOKENIZER_FILE}
    model = models.BPE
    slow_tokenizer_class = TinyLMTokenizer

    def __init__(
        self,
        vocab: dict[str, int] | str | None = None,
        merges: list | str | None = None,
        vocab_file: str | None = None,
        merges_file: str | None = None,
        errors: str = "replace",
        unk_token: str | None = EOS_TOKEN,
        bos_token: str | None = EOS_TOKEN,
        eos_token: str | None = EOS_TOKEN,
        pad_token: str | None = EOS_TOKEN,
        pattern: str = "gpt2",
        add_prefix_space: bool = False,
        **kwargs: Any,
    ) -> None:
        check_fast_pattern(pattern)
        if isinstance(vocab, dict) and merges is not None:
            _check_same_as_gpt2_files(vocab, _read_merges(merges), vocab_file, merges_file)
        vocab = vocab if vocab is not None else vocab_file
        merges = merges if merges is not None else merges_file
        if vocab is None or merges is None:
            raise ValueError("TinyLMTokenizerFast needs `vocab` and `merges` (or `vocab_file` and `merges_file`)")
        drop_folder_kwargs(kwargs)
        # A folder saved by the slow class records backend "custom"; this class always runs on `tokenizers`
        # (processors and pipelines read `backend` to pick the fast code paths).
        kwargs["backend"] = "tokenizers"
        backend = build_byte_level_bpe(_read_vocab(vocab), _read_merges(merges), add_prefix_space=add_prefix_space)
        super().__init__(
            tokenizer_object=backend,
            **base_init_kwargs(errors, unk_token, bos_token, eos_token, pad_token, pattern, kwargs, add_prefix_space),
        )
        # Each class states its own backend: kept out of tokenizer_config.json so that TinyLMTokenizer
        # loading a folder this class saved does not claim to run on `tokenizers`.
        self.init_kwargs.pop("backend", None)

    def _decode(self, token_ids: int | list[int], skip_special_tokens: bool = False, **kwargs: Any) -> str:
        """As `TinyLMTokenizer.decode`: an id outside the vocabulary is a ValueError, not silently dropped, and an
        added token reads as its own characters. (`tokenizers`' ByteLevel decoder reads a token whose characters all
        lie in GPT-2's byte alphabet through that alphabet: an added "Café" would end in the lone byte 0xE9, U+FFFD.)"""
        ids = [token_ids] if isinstance(token_ids, int) else token_ids
        size = len(self)
        for index in ids:
            if not 0 <= int(index) < size:
                raise ValueError(f"token id {index} is not in the vocabulary (size {size})")
        if not self._misread_added_ids().intersection(map(int, ids)):
            return super()._decode(token_ids, skip_special_tokens=skip_special_tokens, **kwargs)
        added = self.added_tokens_encoder
        tokens = self.convert_ids_to_tokens(list(ids), skip_special_tokens=skip_special_tokens)
        data = b"".join(t.encode("utf-8") if t in added else unicode_to_token(t) for t in tokens)
        return data.decode("utf-8", errors=self.init_kwargs.get("errors", "replace"))

    def _misread_added_ids(self) -> set[int]:
        """Ids of the added tokens that `tokenizers`' ByteLevel decoder would read through the byte alphabet into other
        bytes than their UTF-8 (kept until the vocabulary grows)."""
        if getattr(self, "_misread_size", None) != len(self):
            alphabet = unicode_to_bytes()
            self._misread = {i for i, t in self.added_tokens_decoder.items() if all(c in alphabet for c in t.content)
                             and unicode_to_token(t.content) != t.content.encode("utf-8")}
            self._misread_size = len(self)
        return self._misread

    def save_core_files(self, save_directory: str | os.PathLike, prefix: str) -> tuple[str, ...]:
        """vocab.json + merges.txt of the backend's model, so the folder loads with TinyLMTokenizer."""
        model = json.loads(self.backend_tokenizer.to_str())["model"]
        return write_gpt2_files(model["vocab"], _read_merges(model["merges"]), save_directory, prefix=prefix)
