"""tinylm_hf.registration: `import tinylm_hf` registers TinyLM with the Auto classes, whichever is imported first,
without loading torch before transformers' Auto classes are used. Each check runs in a fresh process."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tiny_folders import make_tiny_folder

pytestmark = pytest.mark.contract


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    return make_tiny_folder(tmp_path_factory.mktemp("registration") / "model")


def run_fresh(code: str) -> str:
    """Run `code` in a fresh interpreter; returns its stdout (fails the test on a non-zero exit)."""
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_import_tinylm_hf_then_auto_classes_load_a_folder_without_remote_code(folder):
    out = run_fresh(f"""
        import sys
        import tinylm_hf
        print('torch' in sys.modules)
        from transformers import AutoModelForCausalLM, AutoTokenizer
        model = AutoModelForCausalLM.from_pretrained({str(folder)!r})
        tokenizer = AutoTokenizer.from_pretrained({str(folder)!r})
        print(type(model).__module__, type(tokenizer).__name__)
    """)
    assert out.split() == ["False", "tinylm_hf.modeling.modeling_tinylm", "TinyLMTokenizerFast"]


def test_transformers_first_then_import_tinylm_hf_registers(folder):
    out = run_fresh(f"""
        from transformers import AutoConfig
        import tinylm_hf
        print(type(AutoConfig.from_pretrained({str(folder)!r})).__module__)
    """)
    assert out.strip() == "tinylm_hf.modeling.configuration_tinylm"


def test_a_tinylm_module_imported_first_still_registers(folder):
    # the config module loads transformers' configuration_auto midway through another import: registration
    # waits for that import to finish, then runs
    out = run_fresh(f"""
        from tinylm_hf.modeling.configuration_tinylm import TinyLMConfig
        from transformers import AutoConfig
        print(type(AutoConfig.from_pretrained({str(folder)!r})).__name__)
    """)
    assert out.strip() == "TinyLMConfig"


def test_the_auto_classes_know_every_tokenizer_family():
    out = run_fresh("""
        import tinylm_hf
        from transformers.models.auto import tokenization_auto
        print(sorted(n for n in tokenization_auto.REGISTERED_TOKENIZER_CLASSES if n.startswith('TinyLM')))
    """)
    for name in ("TinyLMTokenizer", "TinyLMWordPieceTokenizer", "TinyLMUnigramTokenizer",
                 "TinyLMSentencePieceBPETokenizer"):
        assert f"'{name}'" in out
