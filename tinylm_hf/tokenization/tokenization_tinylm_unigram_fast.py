"""TinyLMUnigramTokenizerFast: `TinyLMUnigramTokenizer`'s pieces run by `tokenizers`' Unigram model.

This file imports only same-folder siblings: transformers copies it flat for `trust_remote_code`.
"""

from __future__ import annotations

from .tokenization_tinylm_metaspace import TinyLMMetaspaceTokenizerFast
from .unigram import UnigramTokenizer


class TinyLMUnigramTokenizerFast(TinyLMMetaspaceTokenizerFast):
    """Fast twin of `TinyLMUnigramTokenizer`: identical ids on the same folder."""

    core_class = UnigramTokenizer
