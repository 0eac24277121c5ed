"""Training objectives: one module per objective over one base (`base.Objective`), and the table the loop reads.

The loop is the same for every objective; an objective decides its configuration section (`sections`), the data,
the model class, each micro-batch, its loss, its evaluation, its card text and what its folder is published as
(`base`): `causal_lm` (next-token prediction), `masked_lm` (BERT's masked tokens, with its collator `masking` and
stored masks `mlm_data`), `sft` (chat fine-tuning on conversations, `sft_data`), `sequence_classification` (a
classifier head on labelled texts, `classification_data`) and `dpo` (preference tuning). Another objective is one
more module, one more section in `sections` and one more entry in `registry.OBJECTIVE_CLASSES`.

Names are imported on first use (`tinylm_hf.lazy_exports`): `TrainConfig` reads `sections` without loading torch.
"""

from __future__ import annotations

from ...lazy_exports import export_lazily

__all__ = export_lazily(__name__, {
    ".base": ("PUBLISHED_KINDS", "Objective", "PublishedKind", "StepLoss", "data_tokenizer_dir"),
    ".causal_lm": ("CausalLM",),
    ".dpo": ("DirectPreferenceOptimization",),
    ".masked_lm": ("MaskedLM",),
    ".registry": ("OBJECTIVE_CLASSES", "objective_class", "open_objective"),
    ".sections": ("DEFAULT_OBJECTIVE", "SECTIONS", "ConfigSection"),
    ".sequence_classification": ("SequenceClassification",),
    ".sft": ("SupervisedFineTuning",),
})
