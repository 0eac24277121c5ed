"""TinyLMSentencePieceBPETokenizerFast: the same pieces run by `tokenizers`' BPE with byte fallback.

This file imports only same-folder siblings: transformers copies it flat for `trust_remote_code`.
"""

from __future__ import annotations

from .sentencepiece_bpe import SentencePieceBPETokenizer
from .tokenization_tinylm_metaspace import TinyLMMetaspaceTokenizerFast


class TinyLMSentencePieceBPETokenizerFast(TinyLMMetaspaceTokenizerFast):
    """Fast twin of `TinyLMSentencePieceBPETokenizer`: identical ids on the same folder."""

    core_class = SentencePieceBPETokenizer
