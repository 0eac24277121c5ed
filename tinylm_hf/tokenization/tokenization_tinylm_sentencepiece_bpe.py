"""TinyLMSentencePieceBPETokenizer: the from-scratch `SentencePieceBPETokenizer` as a HF (slow) tokenizer.

Folder files: `tokenizer.model` (sentencepiece BPE format, as Llama 2 ships it; identity
normalisation) and `tokenizer.json` (the `tokenizers` BPE twin with byte fallback).

This file imports only same-folder siblings: transformers copies it flat for `trust_remote_code`.
"""

from __future__ import annotations

# first: on an unsupported transformers, a remote-code folder says what it needs (compat.py)
from .compat import require_supported_transformers  # noqa: F401

from .sentencepiece_bpe import SentencePieceBPETokenizer
from .tokenization_tinylm_metaspace import TinyLMMetaspaceTokenizer
# siblings the imports above reach, named so that transformers < 5.10 copies them too (compat.py)
from .atomic_files import FILE_MODE  # noqa: F401
from .metaspace import SPACE_SYMBOL  # noqa: F401
from .metaspace_backend import build_metaspace_backend  # noqa: F401
from .metaspace_tokenizer import UNK_SURFACE  # noqa: F401
from .tokenization_tinylm_base import TOKENIZER_FILE  # noqa: F401


class TinyLMSentencePieceBPETokenizer(TinyLMMetaspaceTokenizer):
    """SentencePiece BPE tokenizer on a sentencepiece `tokenizer.model`, run by tinylm's code."""

    core_class = SentencePieceBPETokenizer
    fast_twin = "tokenization_tinylm_sentencepiece_bpe_fast.TinyLMSentencePieceBPETokenizerFast"
