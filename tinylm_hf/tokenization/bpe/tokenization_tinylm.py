"""TinyLMTokenizer: the from-scratch `BPETokenizer` as a Hugging Face (slow, pure-Python) tokenizer.

Files: GPT-2-format `vocab.json` + `merges.txt`; every saved folder also gets `tokenizer.json`, the same
vocabulary and merges as a `tokenizers` ByteLevel BPE, for fast-tokenizer consumers
(`TinyLMTokenizerFast`). Special tokens: `<|endoftext|>` is eos, bos, unk and **pad** (as in GPT-2
setups; padded positions are told apart by `attention_mask`, so no extra embedding row is needed).
No bos/eos is added by default: `tokenizer(text)["input_ids"] == BPETokenizer.encode(text)`.

Saved folders carry this file flat (`remote_code.py`): it imports the package only by relative imports.
"""

from __future__ import annotations

# first: on an unsupported transformers, a remote-code folder says what it needs (compat.py)
from ...compat import require_supported_transformers  # noqa: F401

from typing import Any

from tokenizers import Tokenizer

from .core import BPETokenizer
from .backend import base_init_kwargs, build_byte_level_bpe, check_fast_pattern
from .byte_unicode import token_to_unicode, unicode_to_token
from .gpt2_files import MERGES_FILE, VOCAB_FILE, load_merges_txt, load_vocab_json
from ..pretokenize import EOS_TOKEN, pattern_name
from ..tokenization_tinylm_base import TinyLMCoreTokenizer

VOCAB_FILES_NAMES = {"vocab_file": VOCAB_FILE, "merges_file": MERGES_FILE}


class TinyLMTokenizer(TinyLMCoreTokenizer):
    """Byte-level BPE tokenizer (GPT-2 file format) backed by tinylm's hand-written `BPETokenizer`.

    Args:
        vocab_file: path to `vocab.json` (bytes-to-unicode token string -> id).
        merges_file: path to `merges.txt` (`#version: 0.2` header, one merge a line).
        vocab: the vocabulary in memory (id -> bytes), e.g. straight from `train_bpe`, instead of the files.
        merges: the merges in memory (byte pairs in rank order), given with `vocab`.
        errors: how `decode` treats invalid UTF-8 (default "replace": U+FFFD, never an exception).
        pattern: pre-tokenization regex, "gpt2" (default), "gpt4" or a custom regex. Only "gpt2"
            can be mirrored by `tokenizer.json`; with another pattern no `tokenizer.json` is written.
    """

    vocab_files_names = VOCAB_FILES_NAMES
    fast_twin = "tokenization_tinylm_fast.TinyLMTokenizerFast"

    def __init__(
        self,
        vocab_file: str | None = None,
        merges_file: str | None = None,
        errors: str = "replace",
        unk_token: str | None = EOS_TOKEN,
        bos_token: str | None = EOS_TOKEN,
        eos_token: str | None = EOS_TOKEN,
        pad_token: str | None = EOS_TOKEN,
        pattern: str = "gpt2",
        add_prefix_space: bool = False,
        *,
        vocab: dict[int, bytes] | None = None,
        merges: list[tuple[bytes, bytes]] | None = None,
        **kwargs: Any,
    ) -> None:
        # The base __init__ calls get_vocab(), so the BPE model must exist before it.
        if vocab is None and merges is None and (vocab_file is None) != (merges_file is None):
            missing, present = (MERGES_FILE, vocab_file) if merges_file is None else (VOCAB_FILE, merges_file)
            raise ValueError(f"{missing} is missing beside {present}: the tokenizer needs both GPT-2 files")
        if (vocab is None) != (merges is None) or (vocab is None and (vocab_file is None or merges_file is None)):
            raise ValueError("TinyLMTokenizer needs vocab_file and merges_file, or vocab and merges (in memory)")
        if vocab is None:
            vocab = load_vocab_json(vocab_file)
            merges = load_merges_txt(merges_file)
        bpe = BPETokenizer(vocab, merges, pattern=pattern)
        self._use_core(bpe, {token_to_unicode(token): i for i, token in bpe.vocab.items()})
        self.errors = errors
        self.pattern = pattern
        self.add_prefix_space = add_prefix_space
        super().__init__(**base_init_kwargs(errors, unk_token, bos_token, eos_token, pad_token, pattern, kwargs,
                                            add_prefix_space))

    @classmethod
    def from_core(
        cls, core: BPETokenizer, *, pad_token: str | None = None, mask_token: str | None = None, **kwargs: Any
    ) -> TinyLMTokenizer:
        """A TinyLMTokenizer over a `BPETokenizer` in memory, its special tokens registered as special.

        `EOS_TOKEN` (else the core's first special token) becomes eos, bos and unk, and pad unless
        `pad_token` is given; `mask_token` becomes the mask token; the other special tokens become extra
        special tokens.
        """
        if not core.special_tokens:
            raise ValueError(f'at least one special token is needed to serve as eos/pad, e.g. "{EOS_TOKEN}"')
        eos = EOS_TOKEN if EOS_TOKEN in core.special_tokens else core.special_tokens[0]
        named = {"pad_token": pad_token or eos} | ({"mask_token": mask_token} if mask_token else {})
        extra = [s for s in core.special_tokens if s not in (eos, *named.values())]
        return cls(vocab=core.vocab, merges=core.merges, unk_token=eos, bos_token=eos, eos_token=eos,
                   pattern=pattern_name(core.pattern), extra_special_tokens=extra, **named, **kwargs)

    # ------------------------------------------------------------------------------ vocabulary
    @property
    def bpe(self) -> BPETokenizer:
        """The core tokenizer (`self.core`)."""
        return self.core

    @property
    def encoder(self) -> dict[str, int]:
        """Token string (GPT-2's byte-to-unicode form) -> id: vocab.json (GPT-2's name for it)."""
        return self._vocab

    @property
    def decoder(self) -> dict[int, str]:
        """Id -> token string."""
        return self._tokens

    # ------------------------------------------------------------------------- encode / decode
    def convert_tokens_to_ids(self, tokens: str | list[str]) -> int | list[int]:
        """Token strings -> ids, one dict lookup each (the base class makes two method calls a token)."""
        if isinstance(tokens, str) or tokens is None:
            return super().convert_tokens_to_ids(tokens)
        added, encoder = self._added_tokens_encoder, self.encoder
        try:
            return [added[t] if t in added else encoder[t] for t in tokens]
        except KeyError:
            return super().convert_tokens_to_ids(tokens)

    def _tokenize(self, text: str, **kwargs: Any) -> list[str]:
        """BPE-encode text that holds no added tokens (the base class split them out, a trie match).

        With `add_prefix_space`, text that does not start with a space gets one, as `tokenizers`'
        ByteLevel pre-tokenizer does for each piece between added tokens and each pre-split word.
        """
        if self.add_prefix_space and not text.startswith(" "):
            text = " " + text
        decoder = self.decoder
        return [decoder[i] for i in self.bpe.encode_ordinary(text)]

    def _token_bytes(self, token: str) -> bytes:
        if token in self._added_tokens_encoder:
            return token.encode("utf-8")
        return unicode_to_token(token)

    def convert_tokens_to_string(self, tokens: list[str]) -> str:
        """Join token strings back into text through their bytes (GPT-2 byte map)."""
        data = b"".join(self._token_bytes(t) for t in tokens)
        return data.decode("utf-8", errors=self.errors)

    model_is_bpe = True  # the twin runs `tokenizers`' BPE

    # ----------------------------------------------------------------------------------- files
    def has_backend_twin(self) -> bool:
        """Only the gpt2 pattern can be mirrored by `tokenizer.json` (see `check_fast_pattern`)."""
        try:
            check_fast_pattern(self.pattern)
        except ValueError:
            return False
        return True

    def to_backend_tokenizer(self) -> Tokenizer:
        """The same vocabulary, merges and added tokens as a `tokenizers.Tokenizer` (gpt2 pattern only)."""
        check_fast_pattern(self.pattern)
        return build_byte_level_bpe(self.encoder, self._unicode_merges(), self.added_tokens_decoder,
                                    add_prefix_space=self.add_prefix_space)

    def _unicode_merges(self) -> list[tuple[str, str]]:
        return [(token_to_unicode(a), token_to_unicode(b)) for a, b in self.bpe.merges]
