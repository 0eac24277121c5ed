"""WordPiece encoding (BERT): normalise, split into words, then greedy longest-match-first per word.

The pipeline is BERT's, step for step as `tokenizers` runs it (`BertNormalizer`, `BertPreTokenizer`,
`WordPiece`), so ids equal `tokenizers` and `transformers.BertTokenizer` on the same `vocab.txt`:

1. clean: drop control/format/private-use characters, U+0000 and U+FFFD; every whitespace -> " ".
2. put spaces around CJK ideographs, so each one is a word.
3. with `lowercase`: NFD, drop non-spacing marks (accents), then lower-case character by character.
4. words: split on spaces; every punctuation character is a word of its own.
5. each word: the longest vocabulary entry that starts it, then the longest `##`-entry that starts
   the rest, and so on; a word that cannot be covered (or is longer than `max_input_chars_per_word`)
   becomes the unknown token.

Character classes come from `bert_unicode.py` (the tables `tokenizers` uses), not `unicodedata`.
Steps 4-5 run as a numba kernel where numba is installed (`wordpiece_kernels`, `jit.kernels_enabled`); the
pure-Python path here (`split_bert_words`, `WordPieceTokenizer._encode_word`) is its specification.
Saved folders carry this file flat (`remote_code.py`): it imports the package only by relative imports.
"""

from __future__ import annotations

import os
import re
import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence
from itertools import chain
from pathlib import Path

from ..atomic_files import write_text_atomic
from .bert_unicode import LOWERCASE_EXTRA, NFD_KEPT, NONSPACING_MARKS, PUNCTUATION, REMOVED, WHITESPACE
from ..jit import kernels_enabled
from ..pretokenize import check_special_tokens, split_on_special_tokens

CONTINUING_SUBWORD_PREFIX = "##"
VOCAB_TXT = "vocab.txt"  # BERT's vocabulary file: one token a line, line number = id
# BERT's special tokens: padding, an uncovered word, a text's start and its end (separator), the mask.
BERT_PAD, BERT_UNK, BERT_CLS, BERT_SEP, BERT_MASK = "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"
BERT_SPECIAL_TOKENS = (BERT_PAD, BERT_UNK, BERT_CLS, BERT_SEP, BERT_MASK)
# CJK ideograph blocks that BERT isolates (as in `tokenizers`' BertNormalizer).
CJK_RANGES = (
    (0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xF900, 0xFAFF), (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F), (0x2B740, 0x2B81F), (0x2B920, 0x2CEAF), (0x2F800, 0x2FA1F),
)  # fmt: skip


def _char_class(ranges: Iterable[tuple[int, int]]) -> str:
    """The inside of a regex character class matching the given inclusive code point ranges."""
    return "".join(re.escape(chr(a)) if a == b else f"{re.escape(chr(a))}-{re.escape(chr(b))}" for a, b in ranges)


class _Patterns:
    """The compiled character classes, either complete or cut to the BMP.

    `re` matches a class of BMP characters with one table lookup but walks astral ranges one by one
    (~20x slower on these classes), so text without astral characters uses the BMP versions.
    """

    def __init__(self, limit: int) -> None:
        def char_class(ranges: Iterable[tuple[int, int]]) -> str:
            return _char_class((a, min(b, limit)) for a, b in ranges if a <= limit)

        self.remove = re.compile(f"[{char_class(REMOVED)}]+")
        self.space = re.compile(f"[{char_class(WHITESPACE)}]")
        self.cjk = re.compile(f"([{char_class(CJK_RANGES)}])")
        self.marks = re.compile(f"[{char_class(NONSPACING_MARKS)}]+")
        self.nfd_kept = re.compile(f"([{char_class(NFD_KEPT)}])") if NFD_KEPT[0][0] <= limit else None
        punctuation = char_class(PUNCTUATION)
        self.words = re.compile(f"[{punctuation}]|[^{punctuation} ]+")


_BMP = _Patterns(0xFFFF)
_ALL = _Patterns(0x10FFFF)
_ASTRAL = re.compile("[\U00010000-\U0010FFFF]")
_LOWER_EXTRA = re.compile(f"[{_char_class((cp, cp) for cp in sorted(LOWERCASE_EXTRA))}]")
# ASCII text takes a shorter path: controls dropped (\t \n \r become spaces) by one translate.
_ASCII_CLEAN = {cp: None for cp in chain(range(0, 9), (11, 12), range(14, 32), (127,))} | {9: " ", 10: " ", 13: " "}


def normalize_bert(text: str, *, lowercase: bool = False) -> str:
    """BERT's normalisation of `text` (steps 1-3 above), as `tokenizers.normalizers.BertNormalizer`.

    >>> normalize_bert("Héllo\\tWörld 中文", lowercase=True)
    'hello world  中  文 '
    """
    if text.isascii():
        text = text.translate(_ASCII_CLEAN)
        return text.lower() if lowercase else text
    replaced = _normalize_by_characters(text, lowercase)
    if replaced is not None:
        return replaced.lower() if lowercase else replaced
    return _normalize_unicode(text, lowercase, _ALL if _ASTRAL.search(text) else _BMP)


def _normalize_unicode(text: str, lowercase: bool, patterns: _Patterns) -> str:
    text = _normalize_before_lower(text, lowercase, patterns)
    return text.lower() if lowercase else text


def _normalize_before_lower(text: str, lowercase: bool, patterns: _Patterns) -> str:
    """Steps 1-3 up to the final `str.lower` (which is per character once no Σ is left)."""
    text = patterns.space.sub(" ", patterns.remove.sub("", text))
    text = patterns.cjk.sub(r" \1 ", text)
    if lowercase:
        text = patterns.marks.sub("", _nfd(text, patterns.nfd_kept))
        text = _LOWER_EXTRA.sub(lambda m: LOWERCASE_EXTRA[ord(m.group())], text)
        text = text.replace("\u03a3", "\u03c3")  # Σ: no final-sigma rule, as in tokenizers
    return text


# (character, lowercase) -> (its normalisation before `str.lower`, whether that is context-free).
_CHARACTER_CACHE: dict[tuple[str, bool], tuple[str, bool]] = {}


def _normalize_character(char: str, lowercase: bool) -> tuple[str, bool]:
    """One character's normalisation (before lower-casing), and whether it is the same inside any text.

    Every step is per character except NFD's canonical reordering, which moves only characters of
    non-zero combining class; if none survives the removal of marks, the order they had is lost anyway.
    """
    key = (char, lowercase)
    if key not in _CHARACTER_CACHE:
        patterns = _ALL if ord(char) > 0xFFFF else _BMP
        out = _normalize_before_lower(char, lowercase, patterns)
        decomposed = unicodedata.normalize("NFD", char)
        context_free = not lowercase or not any(
            unicodedata.combining(c) and not patterns.marks.fullmatch(c) for c in decomposed + out
        )
        _CHARACTER_CACHE[key] = (out, context_free)
    return _CHARACTER_CACHE[key]


def _normalize_by_characters(text: str, lowercase: bool) -> str | None:
    """Steps 1-3 before lower-casing, by one `str.replace` per distinct character that changes.

    Text is mostly characters that stay as they are, so this beats running every pattern over it.
    None when some character's normalisation depends on its neighbours (NFD reordering), or holds
    another character that changes (a later `replace` would change it a second time).
    """
    changes = {}
    for char in set(text):
        out, context_free = _normalize_character(char, lowercase)
        if not context_free:
            return None
        if out != char:
            changes[char] = out
    if any(c != char and c in changes for char, out in changes.items() for c in out):
        return None
    for char, out in changes.items():
        text = text.replace(char, out)
    return text


def _nfd(text: str, kept: re.Pattern | None) -> str:
    """NFD, except for the few characters `tokenizers`' tables do not decompose (all are starters)."""
    if kept is None or kept.search(text) is None:
        return unicodedata.normalize("NFD", text)
    parts = kept.split(text)  # odd items are the kept characters
    return "".join(p if i % 2 else unicodedata.normalize("NFD", p) for i, p in enumerate(parts))


def split_bert_words(normalized: str) -> list[str]:
    """Words of normalised text: split on spaces, each punctuation character alone (BertPreTokenizer)."""
    return choose_word_finder(normalized)(normalized)


def choose_word_finder(normalized: str) -> Callable[[str], list[str]]:
    """`split_bert_words` for `normalized` text and any part of it: the BMP pattern unless it holds astral
    characters (faster)."""
    if normalized.isascii() or _ASTRAL.search(normalized) is None:
        return _BMP.words.findall
    return _ALL.words.findall


def pretokenize_bert(text: str, *, lowercase: bool = False) -> list[str]:
    """BERT words of raw text: `normalize_bert` then `split_bert_words`.

    >>> pretokenize_bert("Don't stop!")
    ['Don', "'", 't', 'stop', '!']
    """
    return split_bert_words(normalize_bert(text, lowercase=lowercase))


class WordPieceTokenizer:
    """BERT's WordPiece: `vocab` (tokens in id order, or token -> id), greedy longest-match-first.

    Special tokens (`special_tokens`, optional) are matched in the raw text first, longest first, as
    `tokenizers` matches added tokens; by default none are, as with a bare `WordPiece` model.

    >>> tok = WordPieceTokenizer(["[UNK]", "un", "##aff", "##able", "aff", "!"], lowercase=True)
    >>> tok.encode("Unaffable! Affable?")
    [1, 2, 3, 5, 4, 3, 0]
    >>> tok.tokenize("Unaffable!")
    ['un', '##aff', '##able', '!']
    >>> tok.decode([1, 2, 3, 5])
    'unaffable!'
    """

    def __init__(
        self,
        vocab: Sequence[str] | Mapping[str, int],
        *,
        unk_token: str = BERT_UNK,
        lowercase: bool = False,
        max_input_chars_per_word: int = 100,
        continuing_subword_prefix: str = CONTINUING_SUBWORD_PREFIX,
        special_tokens: Sequence[str] | None = None,
    ) -> None:
        self.token_to_id: dict[str, int] = _vocab_mapping(vocab)
        self.vocab: dict[int, str] = {i: t for t, i in self.token_to_id.items()}
        if unk_token not in self.token_to_id:
            raise ValueError(f"unk_token {unk_token!r} is not in the vocabulary; add it or pass the vocab's unknown token")
        if not isinstance(max_input_chars_per_word, int) or max_input_chars_per_word < 1:
            raise ValueError(f"max_input_chars_per_word must be a positive int, got {max_input_chars_per_word!r}")
        self.unk_token = unk_token
        self.unk_id = self.token_to_id[unk_token]
        self.lowercase = bool(lowercase)
        self.max_input_chars_per_word = max_input_chars_per_word
        self.prefix = continuing_subword_prefix
        self.special_tokens = check_special_tokens(special_tokens)
        missing = [t for t in self.special_tokens if t not in self.token_to_id]
        if missing:
            raise ValueError(f"special tokens {missing} are not in the vocabulary")
        self._longest = max(map(len, self.token_to_id))
        self._kernel = None  # wordpiece_kernels.WordPieceKernel, built at the first kernel encode

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state["_kernel"] = None  # derived from the vocabulary: built again where it runs
        return state

    def _encode_word(self, word: str) -> list[int]:
        """Greedy longest-match-first over one word; [unk] if any part cannot be matched."""
        if len(word) > self.max_input_chars_per_word:
            return [self.unk_id]
        vocab, prefix, ids, start = self.token_to_id, self.prefix, [], 0
        while start < len(word):
            end = min(len(word), start + self._longest)
            while end > start:
                piece = word[start:end] if start == 0 else prefix + word[start:end]
                index = vocab.get(piece)
                if index is not None:
                    ids.append(index)
                    break
                end -= 1
            else:
                return [self.unk_id]
            start = end
        return ids

    def _encode_reference(self, normalized: str) -> list[int]:
        """The pure-Python path: BERT's words, each longest-match-first (the kernel's specification)."""
        return list(chain.from_iterable(map(self._encode_word, split_bert_words(normalized))))

    def _use_kernel(self):
        """The kernel encoder (`wordpiece_kernels.WordPieceKernel`) where numba runs, else None."""
        if not kernels_enabled():
            return None
        if self._kernel is None:
            from .kernels import WordPieceKernel

            self._kernel = WordPieceKernel(self.token_to_id, self.prefix, self.unk_id, self.max_input_chars_per_word)
        return self._kernel

    def encode_ordinary(self, text: str) -> list[int]:
        """Ids of `text`, special-token text included as plain text."""
        return self.encode_normalized(normalize_bert(text, lowercase=self.lowercase))

    def encode_normalized(self, normalized: str) -> list[int]:
        """Ids of text already normalised (`normalize_bert` with this tokenizer's `lowercase`)."""
        kernel = self._use_kernel()
        return self._encode_reference(normalized) if kernel is None else kernel.encode(normalized)

    def encode(self, text: str) -> list[int]:
        """Ids of `text`; special tokens (if any were given) map to their own ids."""
        if not self.special_tokens:
            return self.encode_ordinary(text)
        ids: list[int] = []
        for i, part in enumerate(split_on_special_tokens(text, self.special_tokens, keep=True)):
            if i % 2:
                ids.append(self.token_to_id[part])
            elif part:
                ids += self.encode_ordinary(part)
        return ids

    def tokenize(self, text: str) -> list[str]:
        """Token strings of `text` (`##` marks a piece that continues a word)."""
        vocab = self.vocab
        return [vocab[i] for i in self.encode(text)]

    def decode(self, ids: Iterable[int]) -> str:
        """Join tokens as `tokenizers.decoders.WordPiece` does (continuations glued, cleanup on)."""
        try:
            tokens = [self.vocab[i] for i in ids]
        except KeyError as exc:
            raise ValueError(f"token id {exc.args[0]!r} is not in the vocabulary (size {len(self.vocab)})") from None
        return join_wordpieces(tokens, self.prefix)

    # ------------------------------------------------------------------------------------ files
    files = (VOCAB_TXT,)  # what `save` writes into a folder

    @classmethod
    def load(cls, directory: str | os.PathLike, **kwargs) -> WordPieceTokenizer:
        """Load the `vocab.txt` that `save` wrote into `directory`."""
        return cls.from_file(Path(directory) / VOCAB_TXT, **kwargs)

    @classmethod
    def from_file(cls, vocab_path: str | os.PathLike, **kwargs) -> WordPieceTokenizer:
        """Load a BERT `vocab.txt` (one token a line, line number = id)."""
        return cls(load_vocab_txt(vocab_path), **kwargs)

    def save(self, directory: str | os.PathLike, *, prefix: str = "") -> Path:
        """Write the vocabulary as a BERT `vocab.txt` (named after `prefix`) into `directory` (created), atomically.

        A path ending in `.txt` that is not a folder is the file to write itself (as this method was first
        called).
        """
        path = Path(directory)
        if path.is_dir() or path.suffix != ".txt":
            path.mkdir(parents=True, exist_ok=True)
            path = path / f"{prefix}{VOCAB_TXT}"
        return write_vocab_txt([self.vocab[i] for i in range(len(self.vocab))], path)


def _vocab_mapping(vocab: Sequence[str] | Mapping[str, int]) -> dict[str, int]:
    if isinstance(vocab, Mapping):
        mapping = dict(vocab)
        if sorted(mapping.values()) != list(range(len(mapping))):
            raise ValueError("vocab ids must be 0..len(vocab)-1, each used once")
    elif isinstance(vocab, (str, bytes)) or not isinstance(vocab, Sequence):
        raise TypeError(f"vocab must be a list of tokens in id order or a token -> id dict, got {type(vocab).__name__}")
    else:
        mapping = {token: i for i, token in enumerate(vocab)}
        if len(mapping) != len(vocab):
            duplicates = sorted({t for t in vocab if list(vocab).count(t) > 1})
            raise ValueError(f"duplicate tokens in vocab: {duplicates[:10]}")
    if not mapping:
        raise ValueError("vocab is empty")
    bad = [t for t in mapping if not isinstance(t, str) or not t]
    if bad:
        raise ValueError(f"vocab tokens must be non-empty strings, got {bad[:5]}")
    return mapping


# Cleanup applied by `tokenizers.decoders.WordPiece(cleanup=True)` to each decoded token, in order.
_CLEANUP = ((" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"), (" n't", "n't"), (" 'm", "'m"),
            (" do not", " don't"), (" 's", "'s"), (" 've", "'ve"), (" 're", "'re"))  # fmt: skip


def join_wordpieces(tokens: list[str], prefix: str = CONTINUING_SUBWORD_PREFIX, *, cleanup: bool = True) -> str:
    """Text of WordPiece tokens: continuations glued to the word before, others after a space."""
    out = []
    for i, token in enumerate(tokens):
        if i:
            token = token[len(prefix) :] if prefix and token.startswith(prefix) else " " + token
        if cleanup:
            for old, new in _CLEANUP:
                token = token.replace(old, new)
        out.append(token)
    return "".join(out)


# ----------------------------------------------------------------------------------- vocab.txt
def load_vocab_txt(path: str | os.PathLike) -> list[str]:
    """Tokens of a BERT `vocab.txt` in id order; corrupt files raise ValueError naming the line."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"vocab file not found: {str(path)!r}")
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise ValueError(f"{str(path)!r} is not UTF-8 (line {line}): is it really a BERT vocab.txt?") from None
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the final newline
    tokens = [line[:-1] if line.endswith("\r") else line for line in lines]
    if not tokens:
        raise ValueError(f"{str(path)!r} is empty: a vocab.txt holds one token a line")
    seen: dict[str, int] = {}
    for number, token in enumerate(tokens, start=1):
        if not token or any(c.isspace() for c in token):
            raise ValueError(f"{str(path)!r} line {number}: token {token!r} is empty or holds whitespace")
        if token in seen:
            raise ValueError(f"{str(path)!r} line {number}: token {token!r} repeats line {seen[token]}")
        seen[token] = number
    return tokens


def write_vocab_txt(tokens: Sequence[str], path: str | os.PathLike) -> Path:
    """Write tokens (in id order) one a line, atomically."""
    path = Path(path)
    bad = [t for t in tokens if not t or any(c.isspace() for c in t)]
    if bad:
        raise ValueError(f"vocab.txt tokens must be non-empty and free of whitespace, got {bad[:5]}")
    write_text_atomic(path, "".join(t + "\n" for t in tokens))
    return path


def word_boundaries(tokens: list[str | None], tokenizer: object) -> tuple[list[bool], list[bool]]:
    """Per token: (starts a word, ends with a line break), for WordPiece vocabularies: a token starts a word unless
    it begins with the continuation prefix (the tokenizer's, else ``##``); WordPiece keeps no line breaks."""
    prefix = continuation_prefix(tokenizer) or CONTINUING_SUBWORD_PREFIX
    return [not (t or "").startswith(prefix) for t in tokens], [False] * len(tokens)


def continuation_prefix(tokenizer: object) -> str | None:
    """The continuation prefix ("##") a tokenizer says it uses: a TinyLM WordPiece core's, or its `tokenizers`
    backend's WordPiece model's; None where it says none."""
    prefix = getattr(getattr(tokenizer, "wordpiece", None), "prefix", None)  # TinyLMWordPieceTokenizer
    if prefix:
        return prefix
    model = getattr(getattr(tokenizer, "backend_tokenizer", None), "model", None)
    return getattr(model, "continuing_subword_prefix", None) if type(model).__name__ == "WordPiece" else None
