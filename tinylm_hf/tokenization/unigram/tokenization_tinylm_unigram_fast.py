"""TinyLMUnigramTokenizerFast: `TinyLMUnigramTokenizer`'s pieces run by `tokenizers`' Unigram model.

Saved folders carry this file flat (`remote_code.py`): it imports the package only by relative imports.
"""

from __future__ import annotations

# first: on an unsupported transformers, a remote-code folder says what it needs (compat.py)
from ...compat import require_supported_transformers  # noqa: F401

from ..metaspace.tokenization_tinylm_metaspace import TinyLMMetaspaceTokenizerFast
from .tokenization_tinylm_unigram import TinyLMUnigramTokenizer
from .core import UnigramTokenizer


class TinyLMUnigramTokenizerFast(TinyLMMetaspaceTokenizerFast):
    """Fast twin of `TinyLMUnigramTokenizer`: identical ids on the same folder."""

    core_class = UnigramTokenizer
    slow_tokenizer_class = TinyLMUnigramTokenizer
