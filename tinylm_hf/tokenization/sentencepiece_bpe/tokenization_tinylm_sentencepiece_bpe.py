"""TinyLMSentencePieceBPETokenizer: the from-scratch `SentencePieceBPETokenizer` as a HF (slow) tokenizer.

Folder files: `tokenizer.model` (sentencepiece BPE format, as Llama 2 ships it; identity
normalisation) and `tokenizer.json` (the `tokenizers` BPE twin with byte fallback).

Saved folders carry this file flat (`remote_code.py`): it imports the package only by relative imports.
"""

from __future__ import annotations

# first: on an unsupported transformers, a remote-code folder says what it needs (compat.py)
from ...compat import require_supported_transformers  # noqa: F401

from .core import SentencePieceBPETokenizer
from ..metaspace.tokenization_tinylm_metaspace import TinyLMMetaspaceTokenizer


class TinyLMSentencePieceBPETokenizer(TinyLMMetaspaceTokenizer):
    """SentencePiece BPE tokenizer on a sentencepiece `tokenizer.model`, run by tinylm's code."""

    core_class = SentencePieceBPETokenizer
    fast_twin = "tokenization_tinylm_sentencepiece_bpe_fast.TinyLMSentencePieceBPETokenizerFast"
