"""The one place TinyLM's classes are registered with transformers' Auto classes.

After `register()` (which `import tinylm_hf` calls), `AutoConfig`, `AutoModel`,
`AutoModelForCausalLM`, `AutoModelForMaskedLM`, the task Auto classes (`TASK_HEADS`) and `AutoTokenizer`
resolve `model_type="tinylm"` folders to the installed classes, so a folder's own `*.py` files are never
needed (nor run) while tinylm_hf is installed.
`register_for_auto_class` makes `save_pretrained` write `auto_map` and copy the code, so saved
folders also load where tinylm_hf is not installed, with `trust_remote_code=True`.
"""

from __future__ import annotations

from transformers import (
    AutoConfig,
    AutoModel,
    AutoModelForCausalLM,
    AutoModelForMaskedLM,
    AutoModelForQuestionAnswering,
    AutoModelForSequenceClassification,
    AutoModelForTokenClassification,
    AutoTokenizer,
)

from transformers.models.auto import tokenization_auto

from .modeling import TinyLMConfig, TinyLMForCausalLM, TinyLMForMaskedLM, TinyLMModel
from .modeling import TinyLMForQuestionAnswering, TinyLMForSequenceClassification, TinyLMForTokenClassification
from .tokenization import (
    TinyLMSentencePieceBPETokenizer,
    TinyLMTokenizer,
    TinyLMUnigramTokenizer,
    TinyLMWordPieceTokenizer,
)

# Tokenizers that serve no config of their own: AutoTokenizer finds them by the `tokenizer_class`
# name in tokenizer_config.json (the table AutoTokenizer.register fills; only the slow classes, so
# AutoTokenizer returns our from-scratch tokenizer, as for BPE).
STANDALONE_TOKENIZERS = (TinyLMWordPieceTokenizer, TinyLMUnigramTokenizer, TinyLMSentencePieceBPETokenizer)

# Auto class -> the TinyLM head it returns, for a causal-LM or a masked-LM TinyLM folder alike
TASK_HEADS = {
    AutoModelForSequenceClassification: TinyLMForSequenceClassification,
    AutoModelForTokenClassification: TinyLMForTokenClassification,
    AutoModelForQuestionAnswering: TinyLMForQuestionAnswering,
}

_DONE = False


def register() -> None:
    """Register config, models and tokenizer with the Auto classes (idempotent)."""
    global _DONE
    if _DONE:
        return
    AutoConfig.register(TinyLMConfig.model_type, TinyLMConfig, exist_ok=True)
    AutoModel.register(TinyLMConfig, TinyLMModel, exist_ok=True)
    AutoModelForCausalLM.register(TinyLMConfig, TinyLMForCausalLM, exist_ok=True)
    AutoModelForMaskedLM.register(TinyLMConfig, TinyLMForMaskedLM, exist_ok=True)
    for auto_class, head in TASK_HEADS.items():
        auto_class.register(TinyLMConfig, head, exist_ok=True)
        head.register_for_auto_class(auto_class.__name__)
    # AutoTokenizer returns the from-scratch slow tokenizer; the fast twin is loaded by its own class.
    AutoTokenizer.register(TinyLMConfig, slow_tokenizer_class=TinyLMTokenizer, exist_ok=True)
    TinyLMConfig.register_for_auto_class("AutoConfig")
    TinyLMModel.register_for_auto_class("AutoModel")
    TinyLMForCausalLM.register_for_auto_class("AutoModelForCausalLM")
    TinyLMForMaskedLM.register_for_auto_class("AutoModelForMaskedLM")
    TinyLMTokenizer.register_for_auto_class("AutoTokenizer")
    for tokenizer_class in STANDALONE_TOKENIZERS:
        tokenization_auto.REGISTERED_TOKENIZER_CLASSES[tokenizer_class.__name__] = tokenizer_class
        tokenizer_class.register_for_auto_class("AutoTokenizer")
    _DONE = True
