"""TinyLMWordPieceTokenizer: the from-scratch `WordPieceTokenizer` as a Hugging Face (slow) tokenizer.

Files: BERT's `vocab.txt` (one token a line, line number = id); every saved folder also gets
`tokenizer.json`, the same WordPiece as a `tokenizers` pipeline, for fast-tokenizer consumers
(`TinyLMWordPieceTokenizerFast`). With special tokens, inputs are `[CLS] A [SEP]` and
`[CLS] A [SEP] B [SEP]`, `token_type_ids` 0 for the first segment and 1 for the second, as BERT, when
asked for (`return_token_type_ids=True`): TinyLM's models have no token type embeddings, so by default the
tokenizer returns only what they take (`input_ids`, `attention_mask`), and `model.generate(**tok(text))`
works for a causal model trained on WordPiece pieces (as RoBERTa's tokenizer, whose model has none either).

Saved folders carry this file flat (`remote_code.py`): it imports the package only by relative imports.
"""

from __future__ import annotations

# first: on an unsupported transformers, a remote-code folder says what it needs (compat.py)
from ...compat import require_supported_transformers  # noqa: F401

from typing import Any

from tokenizers import Tokenizer

from ..tokenization_tinylm_base import TinyLMCoreTokenizer
from .core import (
    BERT_CLS,
    BERT_MASK,
    BERT_PAD,
    BERT_SEP,
    BERT_UNK,
    CONTINUING_SUBWORD_PREFIX,
    VOCAB_TXT,
    WordPieceTokenizer,
    join_wordpieces,
    load_vocab_txt,
    normalize_bert,
)
from .backend import build_bert_wordpiece, wordpiece_init_kwargs

VOCAB_FILES_NAMES = {"vocab_file": VOCAB_TXT}


class TinyLMWordPieceTokenizer(TinyLMCoreTokenizer):
    """BERT-style WordPiece tokenizer (`vocab.txt`) backed by tinylm's hand-written `WordPieceTokenizer`.

    Args:
        vocab_file: path to a BERT `vocab.txt`.
        do_lower_case: lower-case and strip accents before matching (BERT "uncased").
        max_input_chars_per_word: longer words become the unknown token.
        core: a `WordPieceTokenizer` in memory instead of `vocab_file` (see `from_core`).
    """

    vocab_files_names = VOCAB_FILES_NAMES
    fast_twin = "tokenization_tinylm_wordpiece_fast.TinyLMWordPieceTokenizerFast"

    def __init__(
        self,
        vocab_file: str | None = None,
        do_lower_case: bool = False,
        unk_token: str = BERT_UNK,
        sep_token: str | None = BERT_SEP,
        pad_token: str | None = BERT_PAD,
        cls_token: str | None = BERT_CLS,
        mask_token: str | None = BERT_MASK,
        max_input_chars_per_word: int = 100,
        *,
        core: WordPieceTokenizer | None = None,
        **kwargs: Any,
    ) -> None:
        # The base __init__ calls get_vocab(), so the model must exist before it.
        if core is None:
            if vocab_file is None:
                raise ValueError("TinyLMWordPieceTokenizer needs vocab_file (a BERT vocab.txt) or core (in memory)")
            core = WordPieceTokenizer(
                load_vocab_txt(vocab_file),
                unk_token=str(unk_token),
                lowercase=do_lower_case,
                max_input_chars_per_word=max_input_chars_per_word,
            )
        self._use_core(core, core.token_to_id)
        self.do_lower_case = do_lower_case
        self.max_input_chars_per_word = max_input_chars_per_word
        special = {"unk_token": unk_token, "sep_token": sep_token, "pad_token": pad_token,
                   "cls_token": cls_token, "mask_token": mask_token}  # fmt: skip
        super().__init__(**wordpiece_init_kwargs(do_lower_case, max_input_chars_per_word, special, kwargs))

    @classmethod
    def from_core(cls, core: WordPieceTokenizer, **kwargs: Any) -> TinyLMWordPieceTokenizer:
        """A TinyLMWordPieceTokenizer over a `WordPieceTokenizer` in memory (its vocabulary and options).

        The core's own special tokens are left to the Hugging Face side, which matches added tokens.
        """
        if core.prefix != CONTINUING_SUBWORD_PREFIX:
            raise ValueError(f"the Hugging Face WordPiece classes use the {CONTINUING_SUBWORD_PREFIX!r} prefix, "
                             f"this tokenizer {core.prefix!r}")
        options = {"unk_token": core.unk_token, "lowercase": core.lowercase,
                   "max_input_chars_per_word": core.max_input_chars_per_word}  # fmt: skip
        own = WordPieceTokenizer(core.token_to_id, **options)
        return cls(core=own, do_lower_case=core.lowercase, unk_token=core.unk_token,
                   max_input_chars_per_word=core.max_input_chars_per_word, **kwargs)

    # ------------------------------------------------------------------------------ vocabulary
    @property
    def wordpiece(self) -> WordPieceTokenizer:
        """The core tokenizer (`self.core`)."""
        return self.core

    def _unk_id(self) -> int:
        return self.core.unk_id

    # ------------------------------------------------------------------------- encode / decode
    def _tokenize(self, text: str, **kwargs: Any) -> list[str]:
        """WordPiece tokens of text that holds no added tokens (the base class split them out)."""
        return self.wordpiece.tokenize(text)

    def _normalize(self, text: str) -> str:
        """BERT's clean-up (and lower-casing), as the twin's BertNormalizer."""
        return normalize_bert(text, lowercase=self.do_lower_case)

    def _tokenize_normalized(self, text: str) -> list[str]:
        vocab = self.wordpiece.vocab
        return [vocab[i] for i in self.wordpiece.encode_normalized(text)]

    def convert_tokens_to_string(self, tokens: list[str]) -> str:
        """Join tokens as `tokenizers.decoders.WordPiece` does, so slow and fast decode alike."""
        return join_wordpieces(tokens, self.wordpiece.prefix)

    # ----------------------------------------------------------------------------------- files
    def to_backend_tokenizer(self) -> Tokenizer:
        """The same vocabulary, normaliser, template and added tokens as a `tokenizers.Tokenizer`."""
        return build_bert_wordpiece(
            self.wordpiece.token_to_id,
            lowercase=self.do_lower_case,
            unk_token=self.wordpiece.unk_token,
            cls_token=None if self.cls_token is None else str(self.cls_token),
            sep_token=None if self.sep_token is None else str(self.sep_token),
            max_input_chars_per_word=self.max_input_chars_per_word,
            added_tokens=self.added_tokens_decoder,
        )
