"""tinylm_hf.lazy_exports: package names imported on first use, every name the package exported before."""

from __future__ import annotations

import subprocess
import sys
import types

import pytest

import tinylm_hf

# tinylm_hf.__all__ before its __init__ became lazy: every name stays importable from the package
PUBLIC_NAMES = (
    "AdamW BPETokenizer EOS_TOKEN MLMCollator RunSummary SentencePieceBPETokenizer TinyLMConfig TinyLMForCausalLM "
    "TinyLMForMaskedLM TinyLMForQuestionAnswering TinyLMForSequenceClassification TinyLMForTokenClassification "
    "TinyLMModel TinyLMPreTrainedModel TinyLMSentencePieceBPETokenizer TinyLMSentencePieceBPETokenizerFast "
    "TinyLMTokenizer TinyLMTokenizerFast TinyLMUnigramTokenizer TinyLMUnigramTokenizerFast TinyLMWordPieceTokenizer "
    "TinyLMWordPieceTokenizerFast TrainConfig UnigramTokenizer WordCounts WordPieceTokenizer __version__ "
    "clip_grad_norm cosine_lr count_words cross_entropy get_batch load_checkpoint load_corpus_source_task "
    "load_word_counts param_groups_for_weight_decay prepare_dataset register save_checkpoint save_word_counts "
    "scaled_dot_product_attention softmax split_documents sum_word_counts train train_bpe "
    "train_sentencepiece_bpe train_step train_tokenizer train_unigram train_wordpiece"
).split() + ["Muon", "MuonWithAdamW", "param_groups_for_muon"]  # added beside AdamW since


def test_all_lists_every_name_exported_before():
    assert sorted(tinylm_hf.__all__) == sorted(PUBLIC_NAMES)


@pytest.mark.parametrize("name", PUBLIC_NAMES)
def test_every_public_name_imports_from_the_package(name):
    namespace: dict = {}
    exec(f"from tinylm_hf import {name}", namespace)
    assert namespace[name] is not None


def test_import_tinylm_hf_imports_no_torch_transformers_or_datasets():
    code = "import sys, tinylm_hf; print(sorted(m for m in ('torch', 'transformers', 'datasets') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_a_subpackage_is_an_attribute_as_before():
    assert isinstance(tinylm_hf.publish, types.ModuleType)
    assert tinylm_hf.publish.__name__ == "tinylm_hf.publish"


def test_an_exported_function_wins_over_its_module_of_the_same_name():
    import tinylm_hf.publish.export_gguf  # noqa: F401  (binds the submodule to the package's attribute)
    from tinylm_hf.publish import export_gguf

    assert callable(export_gguf) and not isinstance(export_gguf, types.ModuleType)


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
        tinylm_hf.no_such_name  # noqa: B018
