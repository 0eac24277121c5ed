"""transformers' own ModelTesterMixin (and GenerationTesterMixin where present) run on TinyLM, and its
TokenizerTesterMixin on the four tokenizer families (slow and fast classes).

The common suites live in transformers' source tree, not in the wheel: point ``TRANSFORMERS_TESTS_DIR``
at the ``tests`` folder of a transformers checkout (or of its sdist, ``pip download transformers
--no-binary :all:``; the sdist lacks ``generation/test_utils.py`` and ``exporters/``, which are then
left out). Needs ``parameterized``. The suite runs in a fresh process, with a TinyLM tester written here
in the shape of transformers' LlamaModelTester; every failure must be one we expect.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.contract  # run again on every dependency floor (.ci/run)

REPO_ROOT = Path(__file__).resolve().parents[1]

# A checkpoint with no decoder weights at all: transformers re-initialises it silently; TinyLM raises
# (issue 9: a clear error instead of silently re-initialising a mismatched decoder).
EXPECTED_FAILURES = {"test_model_weights_reload_no_missing_tied_weights"}
# sentencepiece (identity normalisation) adds its dummy-prefix space even to text that starts with a
# space, so " a b" gets one more "▁" than the pre-split ["a", "b"]: both classes of both families equal
# sentencepiece there, and the mixin's expectation (the text's leading space absorbed) does not hold.
EXPECTED_TOKENIZER_FAILURES = {f"{family}_{kind}::test_pretokenized_inputs"
                               for family in ("unigram", "sentencepiece_bpe") for kind in ("slow", "fast")}

TOKENIZER_RUNNER = textwrap.dedent(
    '''
    import unittest

    from transformers import AutoTokenizer

    from tests.test_tokenization_common import TokenizerTesterMixin
    from tinylm_hf import train_tokenizer

    TRAIN = {train!r}


    def make_tester(algorithm, fast):
        class Test(TokenizerTesterMixin, unittest.TestCase):
            from_pretrained_id = []
            test_seq2seq = False

            @classmethod
            def setUpClass(cls):
                super().setUpClass()
                train_tokenizer([TRAIN], 1000, algorithm=algorithm, progress=False).save_pretrained(cls.tmpdirname)
                cls.tokenizer_class = type(AutoTokenizer.from_pretrained(cls.tmpdirname, use_fast=fast))

        Test.__name__ = f"{{algorithm.replace('-', '_')}}_{{'fast' if fast else 'slow'}}"
        return Test


    for algorithm in ("bpe", "wordpiece", "unigram", "sentencepiece-bpe"):
        for fast in (False, True):
            test = make_tester(algorithm, fast)
            globals()[test.__name__] = test
    del test
    '''
)

RUNNER = textwrap.dedent(
    '''
    import unittest

    import torch
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES, MODEL_MAPPING_NAMES
    from transformers.testing_utils import torch_device

    from tests.test_configuration_common import ConfigTester
    from tests.test_modeling_common import GenerationTesterMixin, ModelTesterMixin, ids_tensor
    from tinylm_hf.modeling import TinyLMConfig, TinyLMForCausalLM, TinyLMModel

    # the suites tell a base model and an LM head apart by class name, as for an in-tree model
    MODEL_MAPPING_NAMES.setdefault("tinylm", "TinyLMModel")
    MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.setdefault("tinylm", "TinyLMForCausalLM")


    class TinyLMModelTester:
        def __init__(self, parent, batch_size=13, seq_length=7, vocab_size=99, hidden_size=32,
                     num_hidden_layers=2, num_attention_heads=4, intermediate_size=37):
            self.parent, self.batch_size, self.seq_length = parent, batch_size, seq_length
            self.vocab_size, self.hidden_size, self.intermediate_size = vocab_size, hidden_size, intermediate_size
            self.num_hidden_layers, self.num_attention_heads = num_hidden_layers, num_attention_heads
            self.is_training, self.num_labels = True, 3

        def get_config(self):
            return TinyLMConfig(
                vocab_size=self.vocab_size, hidden_size=self.hidden_size, intermediate_size=self.intermediate_size,
                num_hidden_layers=self.num_hidden_layers, num_attention_heads=self.num_attention_heads,
                max_position_embeddings=512, pad_token_id=0, bos_token_id=1, eos_token_id=2,
            )

        def prepare_config_and_inputs_for_common(self):
            input_ids = ids_tensor([self.batch_size, self.seq_length], self.vocab_size)
            attention_mask = torch.tril(torch.ones_like(input_ids)).to(torch_device)
            return self.get_config(), {"input_ids": input_ids, "attention_mask": attention_mask}


    class TinyLMModelTest(ModelTesterMixin, GenerationTesterMixin, unittest.TestCase):
        all_model_classes = (TinyLMModel, TinyLMForCausalLM)
        pipeline_model_mapping = {"feature-extraction": TinyLMModel, "text-generation": TinyLMForCausalLM}

        def setUp(self):
            self.model_tester = TinyLMModelTester(self)
            self.config_tester = ConfigTester(self, config_class=TinyLMConfig, hidden_size=32)

        def test_config(self):
            self.config_tester.run_common_tests()
    '''
)

# what the sdist leaves out of transformers' tests folder, replaced by empty mixins (their tests do not run)
STUBS = {
    "exporters/test_export.py": "class ExportTesterMixin:\n    pass\n",
    "generation/test_utils.py": "class GenerationTesterMixin:\n    pass\n",
    "utils/test_configuration_utils.py": (
        "config_common_kwargs = {'return_dict': False, 'output_hidden_states': True, 'output_attentions': True}\n"
    ),
}


def transformers_tests_dir() -> Path:
    folder = os.environ.get("TRANSFORMERS_TESTS_DIR")
    if not folder or not (Path(folder) / "test_modeling_common.py").is_file():
        pytest.skip("set TRANSFORMERS_TESTS_DIR to the tests folder of a transformers checkout or sdist")
    pytest.importorskip("parameterized")
    return Path(folder)


def copy_suite(source: Path, target: Path) -> None:
    """transformers' tests folder as a package named `tests`, with the files the sdist lacks stubbed
    (and the tokenizer suite's sample text, real text from our bundled corpus)."""
    for path in source.rglob("*.py"):
        if "models" in path.relative_to(source).parts:
            continue  # the per-model suites are not needed (and are most of the tree)
        dest = target / path.relative_to(source)
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(path.read_bytes())
    for name, text in STUBS.items():
        dest = target / name
        dest.parent.mkdir(parents=True, exist_ok=True)
        for package in (target, dest.parent):
            (package / "__init__.py").touch()
        if not dest.exists():
            dest.write_text(text)
    sample = target / "fixtures" / "sample_text.txt"
    if not sample.exists():
        sample.parent.mkdir(parents=True, exist_ok=True)
        sample.write_text((REPO_ROOT / "tinylm_hf" / "data" / "tinystories_valid_small.txt").read_text()[:3000])


def run_suite(tmp_path: Path, module: str, text: str) -> set[str]:
    """Run `text` as `tests/{module}.py` beside transformers' suites in a fresh process; the ids
    (`Class::test`, or a module-level name) of what failed or errored. Asserts that tests ran."""
    copy_suite(transformers_tests_dir(), tmp_path / "tests")
    (tmp_path / "tests" / f"{module}.py").write_text(text)
    path = [str(REPO_ROOT), str(tmp_path), os.environ.get("PYTHONPATH", "")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in path if p)}
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-W", "ignore", "-rf", f"tests/{module}.py"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=3000,
    )
    assert "passed" in result.stdout, result.stdout[-3000:] + result.stderr[-3000:]
    pattern = rf"^(?:FAILED|SUBFAILED\S*|ERROR) tests/{module}\.py::(\w+(?:::\w+)?)"
    failed = set(re.findall(pattern, result.stdout, re.M))
    print(result.stdout[-6000:])  # shown by pytest when an assertion below fails
    return failed


@pytest.mark.slow
def test_transformers_common_model_suite_passes_except_the_expected(tmp_path: Path) -> None:
    failed = run_suite(tmp_path, "test_tinylm_common", RUNNER)
    assert failed <= {f"TinyLMModelTest::{name}" for name in EXPECTED_FAILURES}


@pytest.mark.slow
def test_transformers_common_tokenizer_suite_passes_except_the_expected(tmp_path: Path) -> None:
    train = REPO_ROOT / "tinylm_hf" / "data" / "tinystories_train_small.txt"
    failed = run_suite(tmp_path, "test_tinylm_tokenization", TOKENIZER_RUNNER.format(train=str(train)))
    assert failed <= EXPECTED_TOKENIZER_FAILURES
