"""TinyLMSentencePieceBPETokenizerFast: the same pieces run by `tokenizers`' BPE with byte fallback.

Saved folders carry this file flat (`remote_code.py`): it imports the package only by relative imports.
"""

from __future__ import annotations

# first: on an unsupported transformers, a remote-code folder says what it needs (compat.py)
from ...compat import require_supported_transformers  # noqa: F401

from .core import SentencePieceBPETokenizer
from ..metaspace.tokenization_tinylm_metaspace import TinyLMMetaspaceTokenizerFast
from .tokenization_tinylm_sentencepiece_bpe import TinyLMSentencePieceBPETokenizer


class TinyLMSentencePieceBPETokenizerFast(TinyLMMetaspaceTokenizerFast):
    """Fast twin of `TinyLMSentencePieceBPETokenizer`: identical ids on the same folder."""

    core_class = SentencePieceBPETokenizer
    slow_tokenizer_class = TinyLMSentencePieceBPETokenizer
