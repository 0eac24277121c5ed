"""The Hugging Face wrappers shared by the sentencepiece-style tokenizers (Unigram, SentencePiece BPE).

`TinyLMMetaspaceTokenizer` (slow, pure Python) runs a `MetaspaceTokenizer` core read from
`tokenizer.model` (sentencepiece's file format, as Llama's and T5's folders ship it) and also
writes `tokenizer.json`, its `tokenizers` twin. `TinyLMMetaspaceTokenizerFast` runs that twin.
A subclass names its core (`core_class`). Special tokens: `<unk>`, `<s>` (bos), `</s>` (eos) as in
sentencepiece; no bos/eos is added by default, so `tokenizer(text)["input_ids"] == core.encode(text)`.
Every text segment between special tokens gets the dummy prefix (tokenizers' `prepend_scheme="always"`).

This file imports only same-folder siblings: transformers copies it flat for `trust_remote_code`.
"""

from __future__ import annotations

# first: on an unsupported transformers, a remote-code folder says what it needs (compat.py)
from .compat import require_supported_transformers  # noqa: F401

import os
from typing import Any

from tokenizers import Tokenizer
from transformers import PreTrainedTokenizer, PreTrainedTokenizerFast

from .byte_level_backend import save_tokenizer_json
from .metaspace import decode_pieces
from .metaspace_backend import build_metaspace_backend
from .metaspace_tokenizer import MetaspaceTokenizer
# siblings the imports above reach, named so that transformers < 5.10 copies them too (compat.py)
from .atomic_files import FILE_MODE  # noqa: F401
from .encode_cache import CACHE_LIMIT  # noqa: F401
from .pretokenize import GPT2_PATTERN  # noqa: F401

MODEL_FILE = "tokenizer.model"
TOKENIZER_FILE = "tokenizer.json"


def _special_kwargs(core: MetaspaceTokenizer, unk_token, bos_token, eos_token, pad_token, kwargs: dict) -> dict:
    """Keyword arguments both classes give their transformers base (they land in tokenizer_config.json)."""
    kwargs.setdefault("clean_up_tokenization_spaces", False)
    named = {unk_token, bos_token, eos_token, pad_token, kwargs.get("mask_token")}
    extra = [t for t in core.special_tokens if t not in named]
    if extra and "extra_special_tokens" not in kwargs:
        kwargs["extra_special_tokens"] = extra
    return {"unk_token": unk_token, "bos_token": bos_token, "eos_token": eos_token, "pad_token": pad_token, **kwargs}


class TinyLMMetaspaceTokenizer(PreTrainedTokenizer):
    """A sentencepiece-style tokenizer (file: `tokenizer.model`) run by tinylm's own code."""

    vocab_files_names = {"vocab_file": MODEL_FILE}
    model_input_names = ["input_ids", "attention_mask"]
    core_class: type[MetaspaceTokenizer] = MetaspaceTokenizer

    def __init__(
        self,
        vocab_file: str,
        unk_token: str | None = "<unk>",
        bos_token: str | None = "<s>",
        eos_token: str | None = "</s>",
        pad_token: str | None = None,
        **kwargs: Any,
    ) -> None:
        # The base __init__ calls get_vocab(), so the core must exist before it.
        self.vocab_file = vocab_file
        self.core = self.core_class.from_sentencepiece(vocab_file)
        super().__init__(**_special_kwargs(self.core, unk_token, bos_token, eos_token, pad_token, kwargs))

    @property
    def vocab_size(self) -> int:
        return self.core.vocab_size

    def get_vocab(self) -> dict[str, int]:
        vocab = dict(self.core.piece_to_id)
        vocab.update(self._added_tokens_encoder)
        return vocab

    def _tokenize(self, text: str, **kwargs: Any) -> list[str]:
        pieces = self.core.pieces
        return [pieces[i] for i in self.core.encode(text)]

    def _convert_token_to_id(self, token: str) -> int:
        return self.core.piece_to_id.get(token, self.core.unk_id)

    def _convert_id_to_token(self, index: int) -> str:
        if not 0 <= index < self.core.vocab_size:
            raise ValueError(f"token id {index} is not in the vocabulary (size {self.core.vocab_size})")
        return self.core.pieces[index]

    def convert_tokens_to_string(self, tokens: list[str]) -> str:
        """Pieces back to text: `▁` to spaces, byte pieces to UTF-8, the dummy prefix dropped."""
        return decode_pieces(tokens, add_dummy_prefix=self.core.add_dummy_prefix)

    def save_vocabulary(self, save_directory: str, filename_prefix: str | None = None) -> tuple[str, ...]:
        """Write `tokenizer.model` (sentencepiece format) and its `tokenizer.json` twin."""
        if not os.path.isdir(save_directory):
            raise FileNotFoundError(f"save_vocabulary needs an existing directory, got {save_directory!r}")
        prefix = f"{filename_prefix}-" if filename_prefix else ""
        model_path = self.core.save(os.path.join(save_directory, prefix + MODEL_FILE))
        json_path = save_tokenizer_json(self.to_backend_tokenizer(), os.path.join(save_directory, prefix + TOKENIZER_FILE))
        return model_path, json_path

    def to_backend_tokenizer(self) -> Tokenizer:
        """The same pieces as a `tokenizers.Tokenizer` (what `tokenizer.json` holds)."""
        return build_metaspace_backend(self.core)


class TinyLMMetaspaceTokenizerFast(PreTrainedTokenizerFast):
    """Fast twin: the `tokenizers` backend built from the same `tokenizer.model`; ids equal the slow class's."""

    vocab_files_names = {"vocab_file": MODEL_FILE, "tokenizer_file": TOKENIZER_FILE}
    model_input_names = ["input_ids", "attention_mask"]
    slow_tokenizer_class = None
    core_class: type[MetaspaceTokenizer] = MetaspaceTokenizer

    def __init__(
        self,
        vocab_file: str | None = None,
        unk_token: str | None = "<unk>",
        bos_token: str | None = "<s>",
        eos_token: str | None = "</s>",
        pad_token: str | None = None,
        **kwargs: Any,
    ) -> None:
        if vocab_file is None or not os.path.isfile(vocab_file):
            raise ValueError(f"{type(self).__name__} is built from {MODEL_FILE}; the folder has none (got {vocab_file!r})")
        for key in ("tokenizer_object", "tokenizer_file", "vocab", "merges", "auto_map"):
            kwargs.pop(key, None)
        self.vocab_file = vocab_file
        self.core = self.core_class.from_sentencepiece(vocab_file)
        super().__init__(
            tokenizer_object=build_metaspace_backend(self.core),
            **_special_kwargs(self.core, unk_token, bos_token, eos_token, pad_token, kwargs),
        )

    def _save_pretrained(self, save_directory, file_names, legacy_format=None, filename_prefix=None):
        """Write tokenizer.json and also tokenizer.model, so the folder loads with the slow class."""
        file_names = super()._save_pretrained(save_directory, file_names, legacy_format, filename_prefix)
        prefix = f"{filename_prefix}-" if filename_prefix else ""
        return file_names + (self.core.save(os.path.join(save_directory, prefix + MODEL_FILE)),)
