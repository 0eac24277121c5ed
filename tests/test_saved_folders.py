"""Folders saved by an earlier release keep loading with `trust_remote_code=True` where tinylm_hf is not installed.

`tests/fixtures/saved_folders/` was written by tinylm_hf 0.1.0 (the flat-source layout, before `save_pretrained`
built the remote code from the import closure): a tiny causal LM with its byte-level BPE tokenizer, and a tokenizer
of each other family. `expected.json` holds what those folders gave then: the ids of one text, and the model's greedy
continuation of them.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from conftest import REPO_ROOT, env_without_tinylm

FIXTURE = REPO_ROOT / "tests" / "fixtures" / "saved_folders"
TEXT = "Once upon a time, Lily saw a big dog in the park."

READ_FOLDERS = textwrap.dedent(
    """
    import json, sys
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    root, text = sys.argv[1], sys.argv[2]
    report = {}
    for name in ("model", "wordpiece", "unigram", "sentencepiece_bpe"):
        tokenizer = AutoTokenizer.from_pretrained(f"{root}/{name}", trust_remote_code=True)
        report[name] = {"class": type(tokenizer).__name__, "ids": tokenizer(text)["input_ids"]}
    model = AutoModelForCausalLM.from_pretrained(f"{root}/model", trust_remote_code=True)
    ids = torch.tensor([report["model"]["ids"]])
    report["model"]["continuation"] = model.generate(ids, max_new_tokens=4, do_sample=False)[0, ids.shape[1]:].tolist()
    report["model"]["model_class"] = type(model).__name__
    print(json.dumps(report))
    """
)


def test_folders_saved_by_0_1_load_without_the_package(tmp_path: Path) -> None:
    script = tmp_path / "read_folders.py"
    script.write_text(READ_FOLDERS)
    env = env_without_tinylm(tmp_path, HF_HOME=str(tmp_path / "hf_home"), TQDM_DISABLE="1")
    result = subprocess.run([sys.executable, str(script), str(FIXTURE), TEXT], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report == json.loads((FIXTURE / "expected.json").read_text(encoding="utf-8"))


def test_folders_saved_by_0_1_load_with_the_installed_classes() -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from tinylm_hf.registration import register

    register()  # TinyLM's installed classes, not the folder's code, load it

    expected = json.loads((FIXTURE / "expected.json").read_text(encoding="utf-8"))
    for name, want in expected.items():
        tokenizer = AutoTokenizer.from_pretrained(FIXTURE / name)
        assert (type(tokenizer).__name__, tokenizer(TEXT)["input_ids"]) == (want["class"], want["ids"]), name
    model = AutoModelForCausalLM.from_pretrained(FIXTURE / "model")
    ids = torch.tensor([expected["model"]["ids"]])
    assert model.generate(ids, max_new_tokens=4, do_sample=False)[0, ids.shape[1]:].tolist() == expected["model"]["continuation"]
