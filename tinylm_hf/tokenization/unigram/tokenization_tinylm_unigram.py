"""TinyLMUnigramTokenizer: the from-scratch `UnigramTokenizer` as a Hugging Face (slow) tokenizer.

Folder files: `tokenizer.model` (sentencepiece format; T5/ALBERT-style folders load too when their
normalisation is identity) and `tokenizer.json` (the `tokenizers` Unigram twin).

Saved folders carry this file flat (`remote_code.py`): it imports the package only by relative imports.
"""

from __future__ import annotations

# first: on an unsupported transformers, a remote-code folder says what it needs (compat.py)
from ...compat import require_supported_transformers  # noqa: F401

from ..metaspace.tokenization_tinylm_metaspace import TinyLMMetaspaceTokenizer
from .core import UnigramTokenizer


class TinyLMUnigramTokenizer(TinyLMMetaspaceTokenizer):
    """Unigram (Viterbi) tokenizer on a sentencepiece `tokenizer.model`, run by tinylm's code."""

    core_class = UnigramTokenizer
    fast_twin = "tokenization_tinylm_unigram_fast.TinyLMUnigramTokenizerFast"
