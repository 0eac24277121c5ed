"""TinyLMWordPieceTokenizerFast: the same WordPiece as `TinyLMWordPieceTokenizer`, run by `tokenizers`.

What `AutoTokenizer` returns for a WordPiece folder, as for the BPE pair (`TinyLMWordPieceTokenizer` runs the
hand-written core). Ids, token type ids and decoding equal the slow class.

Saved folders carry this file flat (`remote_code.py`): it imports the package only by relative imports.
"""

from __future__ import annotations

# first: on an unsupported transformers, a remote-code folder says what it needs (compat.py)
from ...compat import require_supported_transformers  # noqa: F401

import json
import os
from typing import Any

from tokenizers import models

from ..tokenization_tinylm_base import TOKENIZER_FILE, TinyLMCoreTokenizerFast, drop_folder_kwargs
from .tokenization_tinylm_wordpiece import TinyLMWordPieceTokenizer
from .core import BERT_CLS, BERT_MASK, BERT_PAD, BERT_SEP, BERT_UNK, VOCAB_TXT, load_vocab_txt, write_vocab_txt
from .backend import build_bert_wordpiece, wordpiece_init_kwargs


class TinyLMWordPieceTokenizerFast(TinyLMCoreTokenizerFast):
    """Fast twin of `TinyLMWordPieceTokenizer`, built from `vocab` (token -> id, what transformers 5
    extracts from `tokenizer.json`) or from `vocab_file` (a BERT `vocab.txt`)."""

    vocab_files_names = {"vocab_file": VOCAB_TXT, "tokenizer_file": TOKENIZER_FILE}
    model = models.WordPiece
    slow_tokenizer_class = TinyLMWordPieceTokenizer

    def __init__(
        self,
        vocab: dict[str, int] | str | None = None,
        vocab_file: str | None = None,
        do_lower_case: bool = False,
        unk_token: str = BERT_UNK,
        sep_token: str | None = BERT_SEP,
        pad_token: str | None = BERT_PAD,
        cls_token: str | None = BERT_CLS,
        mask_token: str | None = BERT_MASK,
        max_input_chars_per_word: int = 100,
        **kwargs: Any,
    ) -> None:
        vocab = vocab if vocab is not None else vocab_file
        if vocab is None:
            raise ValueError("TinyLMWordPieceTokenizerFast needs `vocab` (token -> id) or `vocab_file` (vocab.txt)")
        if isinstance(vocab, (str, os.PathLike)):
            vocab = {token: i for i, token in enumerate(load_vocab_txt(vocab))}
        drop_folder_kwargs(kwargs)
        backend = build_bert_wordpiece(
            vocab,
            lowercase=do_lower_case,
            unk_token=str(unk_token),
            cls_token=None if cls_token is None else str(cls_token),
            sep_token=None if sep_token is None else str(sep_token),
            max_input_chars_per_word=max_input_chars_per_word,
        )
        self.do_lower_case = do_lower_case
        special = {"unk_token": unk_token, "sep_token": sep_token, "pad_token": pad_token,
                   "cls_token": cls_token, "mask_token": mask_token}  # fmt: skip
        super().__init__(
            tokenizer_object=backend,
            **wordpiece_init_kwargs(do_lower_case, max_input_chars_per_word, special, kwargs),
        )

    def save_core_files(self, save_directory: str | os.PathLike, prefix: str) -> tuple[str]:
        """vocab.txt of the backend's model, so the folder loads with TinyLMWordPieceTokenizer."""
        vocab = json.loads(self.backend_tokenizer.to_str())["model"]["vocab"]
        tokens = [token for token, _ in sorted(vocab.items(), key=lambda item: item[1])]
        return (str(write_vocab_txt(tokens, os.path.join(save_directory, prefix + VOCAB_TXT))),)
