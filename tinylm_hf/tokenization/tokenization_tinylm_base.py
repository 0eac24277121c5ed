"""What TinyLM's Hugging Face tokenizer classes share, whatever the family.

A slow class runs a hand-written core tokenizer (`self.core`: `BPETokenizer`, `WordPieceTokenizer`, ...)
that owns the vocabulary and its files. It saves the core's files (`core.save`) and `tokenizer.json`,
its `tokenizers` twin, so any fast-tokenizer consumer loads the folder too. A fast class runs that twin
and also writes the core's files, so the slow class loads what it saved.

Whichever class saves a folder, its `auto_map` names both, the fast twin second: `AutoTokenizer` returns
the fast class (as for transformers' own models), which has every feature of transformers' tokenizer API
(offsets, word ids, assistant masks); `<SlowClass>.from_pretrained(folder)` runs the hand-written core.

A registered class saves its folder's remote code built from its import closure (`remote_code.py`): the
slow and the fast class's, whichever saves.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from typing import Any

import regex
from tokenizers import AddedToken, Tokenizer
from transformers import PreTrainedTokenizer, PreTrainedTokenizerFast

from .atomic_files import write_text_atomic

TOKENIZER_FILE = "tokenizer.json"  # the `tokenizers` twin, in every folder a TinyLM tokenizer saves
# Arguments `from_pretrained` hands every tokenizer class that a TinyLM fast class builds for itself
# (auto_map: the slow class's remote-code pointer; this class does not copy that code when it saves).
FOLDER_KWARGS = ("tokenizer_object", "tokenizer_file", "auto_map")
# `tokenizers`' AddedVocabulary decides single_word, lstrip and rstrip with Rust regex classes: `\w` (Unicode
# word characters) and `\s` (White_Space), which Python's `re` spells otherwise (it counts "²" as a word character
# and "\x1c" as a space).
_WORD_CHAR = regex.compile(r"[\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\p{Join_Control}]")
_SPACE_RUN = regex.compile(r"\p{White_Space}*")
_SPACE_RUN_BEFORE = regex.compile(r"\p{White_Space}*", flags=regex.REVERSE)


def save_tokenizer_json(tokenizer: Tokenizer, path: str | os.PathLike) -> str:
    """Write `tokenizer.json` atomically; returns the path as a string."""
    return str(write_text_atomic(path, tokenizer.to_str(pretty=True)))


class AddedTokenSplitter:
    """Cuts text at added tokens as `tokenizers`' AddedVocabulary does (`find_matches`): the leftmost, then longest,
    match of `patterns` (what each token matches: its content, or its normalised content) wins, and a match then
    refused (single_word inside a word, a special token under `split_special_tokens`) is passed over, not tried
    shorter. lstrip and rstrip take the spaces beside the token into it."""

    def __init__(self, patterns: dict[str, AddedToken]) -> None:
        self.tokens = patterns  # pattern (a token's content or normalised content) -> the token
        longest_first = sorted(patterns, key=len, reverse=True)
        self.regex = re.compile("|".join(map(re.escape, longest_first))) if patterns else None

    def split(self, text: str, skip_special: bool) -> list[tuple[str, AddedToken | None]]:
        """(text, None) and (matched text, token) pieces of `text`, in order."""
        if self.regex is None or not text:
            return [(text, None)]
        pieces: list[tuple[str, AddedToken | None]] = []
        done = 0
        for match in self.regex.finditer(text):
            start, stop = match.span()
            token = self.tokens[match.group()]
            if skip_special and token.special:
                continue
            if token.single_word and _touches_word(text, start, stop):
                continue
            if token.lstrip:
                start = max(_spaces_before(text, start), done)
            if token.rstrip:
                stop = _SPACE_RUN.match(text, stop).end()
            if done < start:
                pieces.append((text[done:start], None))
            if start < stop:  # a token normalised to nothing ("\x01" in BERT) matches nothing but cuts the text there
                pieces.append((text[start:stop], token))
            done = stop
        if done < len(text):
            pieces.append((text[done:], None))
        return pieces


def _touches_word(text: str, start: int, stop: int) -> bool:
    """Whether a word character is right before `start` or right at `stop` (a single_word token inside a word)."""
    return bool(start and _WORD_CHAR.match(text, start - 1)) or _WORD_CHAR.match(text, stop) is not None


def _spaces_before(text: str, end: int) -> int:
    """Where the run of spaces that ends at `end` starts (`end` itself if there is none)."""
    return _SPACE_RUN_BEFORE.match(text, 0, end).start()


def file_prefix(filename_prefix: str | None) -> str:
    """What `save_pretrained(filename_prefix=...)` puts before each file name."""
    return f"{filename_prefix}-" if filename_prefix else ""


class TinyLMCoreTokenizer(PreTrainedTokenizer):
    """A slow tokenizer run by a core tokenizer, whose base vocabulary is `self._vocab` (token string -> id).

    A subclass builds its core (from its files, or takes one given: `from_core`) and calls `_use_core`
    before `super().__init__()` (the base `__init__` calls `get_vocab()`), and names its `tokenizers`
    twin (`to_backend_tokenizer`).
    """

    model_input_names = ["input_ids", "attention_mask"]
    fast_twin: str | None = None  # "module.Class" (its flat module name) of the class that runs `to_backend_tokenizer()`

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._check_added_token_ids()

    def _check_added_token_ids(self) -> None:
        """Refuse an added token (tokenizer_config.json's added_tokens_decoder) on an id the vocabulary gives
        another token: text would encode to one token and decode as the other."""
        for index, token in self._added_tokens_decoder.items():
            base = self._tokens.get(index)
            if base is not None and base != str(token):
                raise ValueError(
                    f"added token {str(token)!r} has id {index}, which the vocabulary gives to {base!r}: fix "
                    f"added_tokens_decoder in tokenizer_config.json (ids from {len(self._vocab)} on are free) "
                    "or train the tokenizer again")

    @classmethod
    def from_core(cls, core: Any, **kwargs: Any) -> TinyLMCoreTokenizer:
        """This class over a core tokenizer in memory (a trainer's result); `kwargs` as for `__init__`."""
        return cls(core=core, **kwargs)

    def _use_core(self, core: Any, vocab: dict[str, int]) -> None:
        """Run `core`, whose base vocabulary as token strings is `vocab`."""
        self.core = core
        self._vocab = vocab
        self._tokens = {index: token for token, index in vocab.items()}

    @property
    def vocab_size(self) -> int:
        """Size of the base vocabulary (the core's), without tokens added later."""
        return len(self._vocab)

    def get_vocab(self) -> dict[str, int]:
        """Token string -> id, base vocabulary plus added tokens."""
        vocab = dict(self._vocab)
        vocab.update(self._added_tokens_encoder)
        return vocab

    # ------------------------------------------------------------------------------ added tokens
    def tokenize(self, text: str, **kwargs: Any) -> list[str]:
        """Token strings of `text`, added tokens matched as the fast twin (`tokenizers`) matches them.

        As `tokenizers` does: tokens with `normalized=False` are cut out of the raw text first; each piece between
        them is normalised (`_normalize`: the dummy prefix and `▁` of the sentencepiece families, BERT's clean-up)
        and tokens with `normalized=True` are matched, by their normalised content, in the normalised piece; what
        is left is encoded by the core (`_tokenize_normalized`). With `split_special_tokens=True` special tokens are
        plain text, plain added tokens still match (they are vocabulary, not control tokens).
        """
        skip_special = kwargs.pop("split_special_tokens", self.split_special_tokens)
        text, kwargs = self.prepare_for_tokenization(text, **kwargs)
        raw, normalized = self._added_token_splitters()
        tokens: list[str] = []
        for piece, token in raw.split(text, skip_special):
            if token is not None:
                tokens.append(token.content)
                continue
            for part, inner in normalized.split(self._normalize(piece), skip_special):
                if inner is not None:
                    tokens.append(inner.content)
                elif part:
                    tokens.extend(self._tokenize_normalized(part))
        return tokens

    def _added_token_splitters(self) -> tuple[AddedTokenSplitter, AddedTokenSplitter]:
        """(splitter of the raw text, of normalised text), built again whenever the added tokens change."""
        key = tuple((i, t.content, t.single_word, t.lstrip, t.rstrip, t.normalized, t.special)
                    for i, t in self._added_tokens_decoder.items())
        if getattr(self, "_splitters_key", None) != key:
            added = sorted(self._added_tokens_decoder.items())
            self._splitters = (
                AddedTokenSplitter({t.content: t for _, t in added if not t.normalized}),
                AddedTokenSplitter({self._normalize(t.content): t for _, t in added if t.normalized}),
            )
            self._splitters_key = key
        return self._splitters

    def _normalize(self, text: str) -> str:
        """`text` as the twin's normaliser leaves it (none here: the text unchanged)."""
        return text

    def _tokenize_normalized(self, text: str) -> list[str]:
        """Token strings of normalised text holding no added token (`_tokenize` where nothing normalises)."""
        return self._tokenize(text)

    def convert_ids_to_tokens(self, ids: int | list[int], skip_special_tokens: bool = False) -> str | list[str]:
        """Token strings of `ids` as the twin gives them (and decodes them): a normalised added token as its
        normalised content (`▁<new>`); `skip_special_tokens` drops the special added tokens."""
        if isinstance(ids, int):
            return self._token_string(ids)
        if skip_special_tokens:
            ids = drop_special_ids(ids, self._added_tokens_decoder)
        return [self._token_string(int(index)) for index in ids]

    def _decode(self, token_ids: int | list[int], skip_special_tokens: bool = False,
                clean_up_tokenization_spaces: bool | None = None, **kwargs: Any) -> str:
        """As transformers decodes, and as its fast classes, never cleaning up the text of a BPE model (" ," stays):
        the clean-up is WordPiece's, and would drop spaces that BPE text holds (unless
        `clean_up_tokenization_spaces_for_bpe_even_though_it_will_corrupt_output`)."""
        if self.model_is_bpe and not self.clean_up_tokenization_spaces_for_bpe_even_though_it_will_corrupt_output:
            clean_up_tokenization_spaces = False
        return super()._decode(token_ids, skip_special_tokens, clean_up_tokenization_spaces, **kwargs)

    @property
    def model_is_bpe(self) -> bool:
        """Whether the twin's model is `tokenizers`' BPE."""
        return False

    def _token_string(self, index: int) -> str:
        token = self._added_tokens_decoder.get(index)
        if token is None:
            return self._convert_id_to_token(index)
        return self._normalize(token.content) if token.normalized else token.content

    def _convert_token_to_id(self, token: str) -> int | None:
        index = self._vocab.get(token)
        return self._unk_id() if index is None else index

    def _unk_id(self) -> int | None:
        """The id a token outside the vocabulary gets: the unknown token's."""
        return self._vocab.get(str(self.unk_token)) if self.unk_token is not None else None

    def _convert_id_to_token(self, index: int) -> str:
        token = self._tokens.get(index)
        if token is None:
            raise ValueError(f"token id {index} is not in the vocabulary (size {len(self)})")
        return token

    def save_vocabulary(self, save_directory: str, filename_prefix: str | None = None) -> tuple[str, ...]:
        """Write the core's files and, when the twin can mirror this tokenizer, `tokenizer.json`."""
        if not os.path.isdir(save_directory):
            raise FileNotFoundError(f"save_vocabulary needs an existing directory, got {save_directory!r}")
        prefix = file_prefix(filename_prefix)
        written = self.core.save(save_directory, prefix=prefix)
        paths = [str(path) for path in (written if isinstance(written, tuple) else (written,))]
        if self.has_backend_twin():
            twin = os.path.join(save_directory, prefix + TOKENIZER_FILE)
            paths.append(save_tokenizer_json(self.to_backend_tokenizer(), twin))
        return tuple(paths)

    def _encode_plus(self, *args: Any, **kwargs: Any) -> Any:
        """As transformers' Python tokenizers encode, but `return_offsets_mapping=True` (which they drop without a
        word) says where offsets come from."""
        if kwargs.get("return_offsets_mapping"):
            raise self._needs_fast_twin("return_offsets_mapping=True")
        return super()._encode_plus(*args, **kwargs)

    def apply_chat_template(self, conversation: Any, *args: Any, **kwargs: Any) -> Any:
        """As transformers renders chats; `return_assistant_tokens_mask=True` needs offsets, so it says where they are."""
        if kwargs.get("return_assistant_tokens_mask"):
            raise self._needs_fast_twin("return_assistant_tokens_mask=True")
        return super().apply_chat_template(conversation, *args, **kwargs)

    def _needs_fast_twin(self, feature: str) -> ValueError:
        twin = (self.fast_twin or "").rpartition(".")[2] if self.has_backend_twin() else ""
        where = f"its fast twin {twin}, what AutoTokenizer.from_pretrained(folder) returns" if twin else "a fast tokenizer"
        return ValueError(f"{feature} needs character offsets, which {type(self).__name__} (the hand-written core) "
                          f"does not compute: use {where}")

    def has_backend_twin(self) -> bool:
        """Whether `to_backend_tokenizer` can mirror this tokenizer (then `tokenizer.json` is saved too)."""
        return True

    def save_pretrained(self, save_directory: str | os.PathLike, *args: Any, **kwargs: Any) -> tuple[str, ...]:
        """Save as transformers does, with the remote code of this class and its fast twin (`save_remote_code`)."""
        twin = self.fast_twin if self.fast_twin and self.has_backend_twin() else None
        return save_remote_code(self, super().save_pretrained, twin, save_directory, *args, **kwargs)

    def _save_pretrained(self, save_directory: str | os.PathLike, file_names: tuple[str, ...], *args: Any,
                         **kwargs: Any) -> tuple[str, ...]:
        """Save as transformers does; a folder with `auto_map` also gets the fast twin's code, named there second
        (a class loaded from a folder's own code: the package's classes build theirs in `save_pretrained`)."""
        saved = super()._save_pretrained(save_directory, file_names, *args, **kwargs)
        if self._auto_class is not None and self.fast_twin and self.has_backend_twin():
            add_fast_twin(save_directory, file_names[0], self.fast_twin)  # [0]: the tokenizer_config.json written
        return saved

    def to_backend_tokenizer(self) -> Tokenizer:
        """The same tokenizer as a `tokenizers.Tokenizer` (what `tokenizer.json` holds)."""
        raise NotImplementedError


def drop_special_ids(ids: list[int], added: dict[int, AddedToken]) -> list[int]:
    """`ids` without the special ones among the `added` tokens (id -> token)."""
    special = {index for index, token in added.items() if token.special}
    return [index for index in ids if int(index) not in special]


class TinyLMCoreTokenizerFast(PreTrainedTokenizerFast):
    """A fast tokenizer that also saves its slow twin's files (`save_core_files`).

    A subclass names its slow twin (`slow_tokenizer_class`): `auto_map` then lists both, and a folder that the
    twin cannot run (no `tokenizer.json`: a byte-level BPE with another pre-tokenization pattern) loads with it.
    """

    model_input_names = ["input_ids", "attention_mask"]
    slow_tokenizer_class: type | None = None

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path: str | os.PathLike, *args: Any, **kwargs: Any) -> Any:
        """This class on `pretrained_model_name_or_path`, or its slow twin where the folder has no `tokenizer.json`."""
        folder = os.path.join(str(pretrained_model_name_or_path), kwargs.get("subfolder") or "")
        if cls.slow_tokenizer_class is not None and os.path.isdir(folder) and not os.path.isfile(
                os.path.join(folder, TOKENIZER_FILE)):
            return cls.slow_tokenizer_class.from_pretrained(pretrained_model_name_or_path, *args, **kwargs)
        return super().from_pretrained(pretrained_model_name_or_path, *args, **kwargs)

    def _decode(self, token_ids: int | list[int], skip_special_tokens: bool = False, **kwargs: Any) -> str:
        """As transformers decodes, but `skip_special_tokens` drops every special added token by its id: `tokenizers`
        drops a token whose string spells a special token, and a normalised one's string is its normalised content
        (`▁<new>`, `<new>` for an uncased `<NEW>`), so it stayed in the text."""
        if skip_special_tokens and not isinstance(token_ids, int):
            token_ids = drop_special_ids(token_ids, self.added_tokens_decoder)
        return super()._decode(token_ids, skip_special_tokens=skip_special_tokens, **kwargs)

    def save_pretrained(self, save_directory: str | os.PathLike, *args: Any, **kwargs: Any) -> tuple[str, ...]:
        """Save as transformers does, with the remote code of this class and its slow twin (`save_remote_code`)."""
        return save_remote_code(self, super().save_pretrained, None, save_directory, *args, **kwargs)

    def _save_pretrained(
        self,
        save_directory: str | os.PathLike,
        file_names: tuple[str, ...],
        legacy_format: bool | None = None,
        filename_prefix: str | None = None,
    ) -> tuple[str, ...]:
        """Write tokenizer.json and also the slow class's files, so the folder loads with either class."""
        file_names = super()._save_pretrained(save_directory, file_names, legacy_format, filename_prefix)
        written = self.save_core_files(save_directory, file_prefix(filename_prefix))
        return file_names + tuple(str(path) for path in written)

    def save_core_files(self, save_directory: str | os.PathLike, prefix: str) -> tuple[str | os.PathLike, ...]:
        """Write the files the slow class loads (its core's) into `save_directory`; return their paths."""
        raise NotImplementedError


def save_remote_code(tokenizer: Any, save: Any, fast_twin: str | None, save_directory: str | os.PathLike,
                     *args: Any, **kwargs: Any) -> tuple[str, ...]:
    """Run transformers' `save` without its code copying, then write the folder's remote code: the import closure
    of the slow and the fast class (`fast_twin` names a slow class's twin), both named in `auto_map`, fast second.

    A class loaded from a folder's own flat code is saved by transformers' copying, as before.
    """
    from ..remote_code import building_remote_code, remote_ref, resolve_ref, write_remote_code

    with building_remote_code(type(tokenizer)) as build:
        saved = save(save_directory, *args, **kwargs)
    if not build:
        return saved
    if isinstance(tokenizer, PreTrainedTokenizerFast):
        slow, fast = getattr(tokenizer, "slow_tokenizer_class", None), type(tokenizer)
    else:
        slow, fast = type(tokenizer), (resolve_ref(fast_twin) if fast_twin else None)
    refs = [remote_ref(cls) if cls is not None else None for cls in (slow, fast)]
    write_remote_code(save_directory, [ref for ref in refs if ref])
    config_file = saved[0]  # the tokenizer_config.json written
    with open(config_file, encoding="utf-8") as handle:
        config = json.load(handle)
    config["auto_map"] = {**config.get("auto_map", {}), type(tokenizer)._auto_class: refs}
    write_text_atomic(config_file, json.dumps(config, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
    return saved


def add_fast_twin(save_directory: str | os.PathLike, config_file: str | os.PathLike, fast_twin: str) -> None:
    """Copy the code of `fast_twin` ("module.Class", a sibling of this file) into `save_directory` and name it
    AutoTokenizer's fast class in `config_file`'s `auto_map` (transformers writes only the saving class there).

    Nothing happens where the module is not beside this file (remote code from a folder saved without it).
    """
    from transformers.dynamic_module_utils import get_relative_import_files

    source = os.path.join(os.path.dirname(os.path.abspath(__file__)), fast_twin.partition(".")[0] + ".py")
    with open(config_file, encoding="utf-8") as handle:
        config = json.load(handle)
    entry = config.get("auto_map", {}).get("AutoTokenizer")
    if not entry or not os.path.isfile(source):
        return
    for path in (source, *get_relative_import_files(source)):
        shutil.copyfile(path, os.path.join(save_directory, os.path.basename(path)))
    config["auto_map"]["AutoTokenizer"] = [entry[0], fast_twin]
    write_text_atomic(config_file, json.dumps(config, indent=2, sort_keys=True, ensure_ascii=False) + "\n")


def drop_folder_kwargs(kwargs: dict, *extra: str) -> None:
    """Remove what `from_pretrained` passes that a TinyLM fast class rebuilds itself (`FOLDER_KWARGS`, `extra`)."""
    for name in (*FOLDER_KWARGS, *extra):
        kwargs.pop(name, None)
