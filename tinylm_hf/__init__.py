"""tinylm_hf: train a small language model from scratch that lives natively in Hugging Face.

Importing the package registers TinyLM's config, models and tokenizer with the transformers Auto classes
(`tinylm_hf.registration`) as soon as those are loaded: `import tinylm_hf` then
`AutoModelForCausalLM.from_pretrained(folder)` loads a TinyLM folder without its own code. The package itself
loads nothing heavy: each public name is imported on first use (`tinylm_hf.lazy_exports`), so the `tinylm`
command line starts without torch.
"""

from __future__ import annotations

from .lazy_exports import export_lazily
from .registration import register_when_transformers_loads

__version__ = "0.1.0"

__all__ = ["__version__", *export_lazily(__name__, {
    ".corpus": ("load_corpus_source_task", "prepare_dataset", "split_documents"),
    ".modeling": (
        "TinyLMConfig", "TinyLMForCausalLM", "TinyLMForMaskedLM", "TinyLMForQuestionAnswering",
        "TinyLMForSequenceClassification", "TinyLMForTokenClassification", "TinyLMModel", "TinyLMPreTrainedModel",
        "scaled_dot_product_attention", "softmax",
    ),
    ".registration": ("register",),
    ".tokenization": (
        "EOS_TOKEN", "BPETokenizer", "SentencePieceBPETokenizer", "TinyLMSentencePieceBPETokenizer",
        "TinyLMSentencePieceBPETokenizerFast", "TinyLMTokenizer", "TinyLMTokenizerFast", "TinyLMUnigramTokenizer",
        "TinyLMUnigramTokenizerFast", "TinyLMWordPieceTokenizer", "TinyLMWordPieceTokenizerFast", "UnigramTokenizer",
        "WordPieceTokenizer",
    ),
    ".tokenizer_training": (
        "WordCounts", "count_words", "load_word_counts", "save_word_counts", "sum_word_counts", "train_bpe",
        "train_sentencepiece_bpe", "train_tokenizer", "train_unigram", "train_wordpiece",
    ),
    ".training": (
        "AdamW", "MLMCollator", "Muon", "MuonWithAdamW", "RunSummary", "TrainConfig", "clip_grad_norm", "cosine_lr",
        "cross_entropy", "get_batch", "load_checkpoint", "param_groups_for_muon", "param_groups_for_weight_decay",
        "save_checkpoint", "train", "train_step",
    ),
})]

register_when_transformers_loads()
