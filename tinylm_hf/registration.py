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
from .tokenizer_training.families import FAMILIES

# The tokenizer of a TinyLM model folder: AutoTokenizer returns this from-scratch slow class for
# model_type="tinylm" (the fast twin is loaded by its own class).
MODEL_TOKENIZER = FAMILIES["bpe"].slow

# Auto class -> the TinyLM head it returns, for a causal-LM or a masked-LM TinyLM folder alike
TASK_HEADS = {
    AutoModelForSequenceClassification: TinyLMForSequenceClassification,
    AutoModelForTokenClassification: TinyLMForTokenClassification,
    AutoModelForQuestionAnswering: TinyLMForQuestionAnswering,
}

_DONE = False


def register() -> None:
    """Register config, models and tokenizers with the Auto classes (idempotent)."""
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
    AutoTokenizer.register(TinyLMConfig, slow_tokenizer_class=MODEL_TOKENIZER, exist_ok=True)
    TinyLMConfig.register_for_auto_class("AutoConfig")
    TinyLMModel.register_for_auto_class("AutoModel")
    TinyLMForCausalLM.register_for_auto_class("AutoModelForCausalLM")
    TinyLMForMaskedLM.register_for_auto_class("AutoModelForMaskedLM")
    # Every family's slow class, found by the `tokenizer_class` name in tokenizer_config.json (the table
    # AutoTokenizer.register fills): AutoTokenizer returns the from-scratch tokenizer of any family.
    for family in FAMILIES.values():
        tokenization_auto.REGISTERED_TOKENIZER_CLASSES[family.slow.__name__] = family.slow
        family.slow.register_for_auto_class("AutoTokenizer")
    _DONE = True
