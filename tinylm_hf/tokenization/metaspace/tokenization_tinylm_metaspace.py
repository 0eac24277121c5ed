"""The Hugging Face wrappers shared by the sentencepiece-style tokenizers (Unigram, SentencePiece BPE).

`TinyLMMetaspaceTokenizer` (slow, pure Python) runs a `MetaspaceTokenizer` core read from
`tokenizer.model` (sentencepiece's file format, as Llama's and T5's folders ship it) and also
writes `tokenizer.json`, its `tokenizers` twin. `TinyLMMetaspaceTokenizerFast` runs that twin.
A subclass names its core (`core_class`). Special tokens: `<unk>`, `<s>` (bos), `</s>` (eos) as in
sentencepiece; no bos/eos is added by default, so `tokenizer(text)["input_ids"] == core.encode(text)`.
Every text segment between special tokens gets the dummy prefix (tokenizers' `prepend_scheme="always"`).

Saved folders carry this file flat (`remote_code.py`): it imports the package only by relative imports.
"""

from __future__ import annotations

# first: on an unsupported transformers, a remote-code folder says what it needs (compat.py)
from ...compat import require_supported_transformers  # noqa: F401

import os
from typing import Any

from tokenizers import Tokenizer

from .sentencepiece_model import BOS_PIECE, EOS_PIECE, MODEL_FILE, UNK_PIECE, decode_pieces
from .backend import build_metaspace_backend
from .core import MetaspaceTokenizer
from ..tokenization_tinylm_base import TOKENIZER_FILE, TinyLMCoreTokenizer, TinyLMCoreTokenizerFast, drop_folder_kwargs


def _special_kwargs(core: MetaspaceTokenizer, unk_token, bos_token, eos_token, pad_token, kwargs: dict) -> dict:
    """Keyword arguments both classes give their transformers base (they land in tokenizer_config.json)."""
    kwargs.setdefault("clean_up_tokenization_spaces", False)
    named = {unk_token, bos_token, eos_token, pad_token, kwargs.get("mask_token")}
    extra = [t for t in core.special_tokens if t not in named]
    if extra and "extra_special_tokens" not in kwargs:
        kwargs["extra_special_tokens"] = extra
    return {"unk_token": unk_token, "bos_token": bos_token, "eos_token": eos_token, "pad_token": pad_token, **kwargs}


class TinyLMMetaspaceTokenizer(TinyLMCoreTokenizer):
    """A sentencepiece-style tokenizer (file: `tokenizer.model`, or a `core` in memory) run by tinylm's own code."""

    vocab_files_names = {"vocab_file": MODEL_FILE}
    core_class: type[MetaspaceTokenizer] = MetaspaceTokenizer

    def __init__(
        self,
        vocab_file: str | None = None,
        unk_token: str | None = UNK_PIECE,
        bos_token: str | None = BOS_PIECE,
        eos_token: str | None = EOS_PIECE,
        pad_token: str | None = None,
        *,
        core: MetaspaceTokenizer | None = None,
        **kwargs: Any,
    ) -> None:
        # The base __init__ calls get_vocab(), so the core must exist before it.
        if core is None:
            if vocab_file is None:
                raise ValueError(f"{type(self).__name__} needs vocab_file (a {MODEL_FILE}) or core (in memory)")
            core = self.core_class.from_sentencepiece(vocab_file)
        elif not isinstance(core, self.core_class):
            raise TypeError(f"{type(self).__name__} runs a {self.core_class.__name__}, got {type(core).__name__}")
        self.vocab_file = vocab_file
        self._use_core(core, core.piece_to_id)
        super().__init__(**_special_kwargs(self.core, unk_token, bos_token, eos_token, pad_token, kwargs))

    def _unk_id(self) -> int:
        return self.core.unk_id

    def _tokenize(self, text: str, **kwargs: Any) -> list[str]:
        pieces = self.core.pieces
        return [pieces[i] for i in self.core.encode(text)]

    def _normalize(self, text: str) -> str:
        """Spaces to `▁` and the dummy prefix, as the twin's normaliser (each piece between added tokens gets one)."""
        return self.core.normalize(text)

    def _tokenize_normalized(self, text: str) -> list[str]:
        pieces = self.core.pieces
        return [pieces[i] for i in self.core.encode_metaspace(text)]

    def convert_tokens_to_string(self, tokens: list[str]) -> str:
        """Pieces back to text: `▁` to spaces, byte pieces to UTF-8, the dummy prefix dropped."""
        return decode_pieces(tokens, add_dummy_prefix=self.core.add_dummy_prefix)

    @property
    def model_is_bpe(self) -> bool:
        """Whether the twin's model is `tokenizers`' BPE (SentencePiece BPE), not Unigram."""
        return self.core.model_type == "bpe"

    def to_backend_tokenizer(self) -> Tokenizer:
        """The same pieces as a `tokenizers.Tokenizer` (what `tokenizer.json` holds)."""
        return build_metaspace_backend(self.core)


class TinyLMMetaspaceTokenizerFast(TinyLMCoreTokenizerFast):
    """Fast twin: the `tokenizers` backend built from the same `tokenizer.model`; ids equal the slow class's."""

    vocab_files_names = {"vocab_file": MODEL_FILE, "tokenizer_file": TOKENIZER_FILE}
    core_class: type[MetaspaceTokenizer] = MetaspaceTokenizer

    def __init__(
        self,
        vocab_file: str | None = None,
        unk_token: str | None = UNK_PIECE,
        bos_token: str | None = BOS_PIECE,
        eos_token: str | None = EOS_PIECE,
        pad_token: str | None = None,
        **kwargs: Any,
    ) -> None:
        if vocab_file is None or not os.path.isfile(vocab_file):
            raise ValueError(f"{type(self).__name__} is built from {MODEL_FILE}; the folder has none (got {vocab_file!r})")
        drop_folder_kwargs(kwargs, "vocab", "merges")
        self.vocab_file = vocab_file
        self.core = self.core_class.from_sentencepiece(vocab_file)
        super().__init__(
            tokenizer_object=build_metaspace_backend(self.core),
            **_special_kwargs(self.core, unk_token, bos_token, eos_token, pad_token, kwargs),
        )

    def _decode(self, token_ids: int | list[int], skip_special_tokens: bool = False,
                clean_up_tokenization_spaces: bool | None = None, **kwargs: Any) -> str:
        """As the slow class (and sentencepiece) decodes. `tokenizers`' ByteFallback turns a run of byte pieces
        holding any invalid byte into U+FFFD throughout (`build_metaspace_backend`): text with U+FFFD is decoded
        again here, from the pieces."""
        text = super()._decode(token_ids, skip_special_tokens=skip_special_tokens,
                               clean_up_tokenization_spaces=clean_up_tokenization_spaces, **kwargs)
        if "\ufffd" not in text or not self.core.byte_fallback:
            return text
        pieces = self.convert_ids_to_tokens(token_ids, skip_special_tokens=skip_special_tokens)
        text = decode_pieces([pieces] if isinstance(pieces, str) else pieces, add_dummy_prefix=self.core.add_dummy_prefix)
        if self.clean_up_tokenization_spaces if clean_up_tokenization_spaces is None else clean_up_tokenization_spaces:
            text = self.clean_up_tokenization(text)
        return text

    def save_core_files(self, save_directory: str | os.PathLike, prefix: str) -> tuple[str]:
        """tokenizer.model, so the folder loads with the slow class."""
        return (self.core.save(save_directory, prefix=prefix),)
