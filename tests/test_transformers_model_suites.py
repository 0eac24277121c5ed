"""transformers' own common model and generation suites (``ModelTesterMixin``, ``GenerationTesterMixin``)
run on TinyLM, as transformers' tests/models/llama/test_modeling_llama.py runs them on Llama.

The suites come from the tests tree of the INSTALLED transformers (``TRANSFORMERS_TESTS_DIR``, see
``transformers_tests_tree.py``; .ci/run downloads it). Without the variable this module is skipped; set wrong
(not that tree, or another version's) it fails to collect. The sdist lacks ``generation/test_utils.py``: then
``GenerationTesterMixin``'s tests do not run and ``test_generation_suite_is_present`` says so (skipped); a
checkout of the installed version's tag has the file (not tried yet: no checkout was reachable where this was
written). tests/test_modeling_tinylm_contract.py checks those generation behaviours against Llama.

Upstream tests marked slow (flash attention and torch.compile ones: 16 on transformers 5.24) run only with
``-m slow``, as ours do. Upstream tests skipped here, each with its reason (the suites' own skips, for an
accelerator, flash attention, DeepSpeed, a composite model, ... are theirs and not listed):
- ``test_model_weights_reload_no_missing_tied_weights``: it saves a checkpoint without any decoder weight and
  expects it to load silently re-initialised; TinyLM refuses it with a clear error by design (issue 9,
  tests/test_modeling_tinylm.py).
"""

from __future__ import annotations

import unittest
from unittest import mock

import pytest

from transformers_tests_tree import find_tests_tree, import_tree, missing_upstream_files

pytestmark = pytest.mark.contract  # what depends on transformers (.ci/run runs it on the newest releases)

TREE = find_tests_tree()
if TREE is None:
    pytest.skip(
        "TRANSFORMERS_TESTS_DIR is unset: point it at the tests folder of the installed transformers' sdist "
        "(.ci/run shows how) to run transformers' common model suites",
        allow_module_level=True,
    )
import_tree(TREE)  # its suites import parameterized (the dev extra)

import torch  # noqa: E402
from transformers.models.auto import modeling_auto  # noqa: E402
from transformers.testing_utils import torch_device  # noqa: E402
from transformers_tests.test_configuration_common import ConfigTester  # noqa: E402
from transformers_tests.test_modeling_common import GenerationTesterMixin, ModelTesterMixin, ids_tensor  # noqa: E402

from tinylm_hf.modeling import TinyLMConfig, TinyLMForCausalLM, TinyLMModel  # noqa: E402
from tinylm_hf.modeling.modeling_tinylm_heads import (  # noqa: E402
    TinyLMForQuestionAnswering,
    TinyLMForSequenceClassification,
    TinyLMForTokenClassification,
)

# the suites tell a class's task (and so which labels to build) by its name in these tables, as for an in-tree
# model; each test adds TinyLM's names and removes them after
TASK_TABLES = {
    "MODEL_MAPPING_NAMES": TinyLMModel,
    "MODEL_FOR_CAUSAL_LM_MAPPING_NAMES": TinyLMForCausalLM,
    "MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES": TinyLMForSequenceClassification,
    "MODEL_FOR_TOKEN_CLASSIFICATION_MAPPING_NAMES": TinyLMForTokenClassification,
    "MODEL_FOR_QUESTION_ANSWERING_MAPPING_NAMES": TinyLMForQuestionAnswering,
}
# upstream test -> why it does not run on TinyLM
SKIPPED = {
    "test_model_weights_reload_no_missing_tied_weights": (
        "TinyLM refuses a checkpoint without decoder weights instead of silently re-initialising it (issue 9)"
    ),
}


class TinyLMModelTester:
    """A tiny TinyLM config and inputs, in the shape of transformers' CausalLMModelTester (causal_lm_tester.py):
    13 sequences of 7 tokens over a 99-token vocabulary, 2 layers of width 32, a lower-triangular mask (every
    sequence left-padded by a different amount)."""

    def __init__(self, parent: unittest.TestCase, batch_size: int = 13, seq_length: int = 7) -> None:
        self.parent, self.batch_size, self.seq_length = parent, batch_size, seq_length
        self.vocab_size, self.hidden_size, self.intermediate_size = 99, 32, 37
        self.num_hidden_layers, self.num_attention_heads = 2, 2
        self.is_training, self.num_labels = True, 3
        self.pad_token_id, self.bos_token_id, self.eos_token_id = 0, 1, 2

    def get_config(self) -> TinyLMConfig:
        return TinyLMConfig(
            vocab_size=self.vocab_size,
            hidden_size=self.hidden_size,
            intermediate_size=self.intermediate_size,
            num_hidden_layers=self.num_hidden_layers,
            num_attention_heads=self.num_attention_heads,
            max_position_embeddings=512,
            pad_token_id=self.pad_token_id,
            bos_token_id=self.bos_token_id,
            eos_token_id=self.eos_token_id,
        )

    def prepare_config_and_inputs_for_common(self) -> tuple[TinyLMConfig, dict[str, torch.Tensor]]:
        input_ids = ids_tensor([self.batch_size, self.seq_length], self.vocab_size)
        attention_mask = torch.tril(torch.ones_like(input_ids)).to(torch_device)
        return self.get_config(), {"input_ids": input_ids, "attention_mask": attention_mask}


class TinyLMModelTest(ModelTesterMixin, GenerationTesterMixin, unittest.TestCase):
    all_model_classes = tuple(TASK_TABLES.values())
    pipeline_model_mapping = {"feature-extraction": TinyLMModel, "text-generation": TinyLMForCausalLM}

    def setUp(self) -> None:
        for table, model_class in TASK_TABLES.items():
            patch = mock.patch.dict(getattr(modeling_auto, table), {TinyLMConfig.model_type: model_class.__name__})
            patch.start()
            self.addCleanup(patch.stop)
        if self._testMethodName in SKIPPED:
            self.skipTest(SKIPPED[self._testMethodName])
        self.model_tester = TinyLMModelTester(self)
        self.config_tester = ConfigTester(self, config_class=TinyLMConfig, hidden_size=32)

    def test_config(self) -> None:
        self.config_tester.run_common_tests()


def test_generation_suite_is_present() -> None:
    """Skipped, naming them, where the tree lacks upstream suites (the sdist has no generation/test_utils.py);
    otherwise checks that the real GenerationTesterMixin, not its stand-in, was imported."""
    missing = missing_upstream_files(TREE)
    if missing:
        pytest.skip(f"the tests tree lacks {', '.join(missing)}: those suites (GenerationTesterMixin ...) did not run")
    assert any(name.startswith("test_") for name in vars(GenerationTesterMixin))
