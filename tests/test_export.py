"""`tinylm export-llama`: a plain LlamaForCausalLM folder, loaded without remote code or tinylm_hf."""

from __future__ import annotations

import json

import pytest
import torch
from tiny_folders import make_tiny_folder, run_fresh

from tinylm_hf.cli import main
from tinylm_hf.export import export_llama

TEXTS = ["Once upon a time, a little cat said: \"Hello!\"", "Lily and Ben played in the park.<|endoftext|>Bye"]


@pytest.fixture(scope="module", params=[False, True], ids=["untied", "tied"])
def exported(request, tmp_path_factory):
    root = tmp_path_factory.mktemp("export")
    src = make_tiny_folder(root / "tinylm", tie_word_embeddings=request.param)
    out = root / "llama"
    assert main(["export-llama", str(src), str(out)]) == 0
    return src, out


def test_folder_has_no_remote_code(exported):
    _, out = exported
    config = json.loads((out / "config.json").read_text())
    assert config["model_type"] == "llama" and config["architectures"] == ["LlamaForCausalLM"]
    assert "auto_map" not in config
    assert "auto_map" not in json.loads((out / "tokenizer_config.json").read_text())
    assert not list(out.glob("*.py"))
    assert (out / "model.safetensors").is_file() and (out / "tokenizer.json").is_file()


def test_logits_and_ids_match_in_a_process_without_tinylm_hf(exported, tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    src, out = exported
    tok = AutoTokenizer.from_pretrained(src)
    model = AutoModelForCausalLM.from_pretrained(src).eval()
    ids = [tok(t, add_special_tokens=False)["input_ids"] for t in TEXTS]
    with torch.no_grad():
        logits = [model(input_ids=torch.tensor([i])).logits[0].tolist() for i in ids]
    code = f"""
import json, sys, torch
from transformers import AutoModelForCausalLM, AutoTokenizer
assert "tinylm_hf" not in sys.modules
try:
    import tinylm_hf
    raise SystemExit("tinylm_hf must not be importable here")
except ImportError:
    pass
tok = AutoTokenizer.from_pretrained({str(out)!r})
model = AutoModelForCausalLM.from_pretrained({str(out)!r}).eval()
ids = [tok(t, add_special_tokens=False)["input_ids"] for t in {TEXTS!r}]
with torch.no_grad():
    logits = [model(input_ids=torch.tensor([i])).logits[0].tolist() for i in ids]
print(json.dumps({{"cls": type(model).__name__, "ids": ids, "logits": logits, "eos": tok.eos_token_id}}))
"""
    got = json.loads(run_fresh(code, tmp_path).stdout.strip().splitlines()[-1])
    assert got["cls"] == "LlamaForCausalLM"
    assert got["ids"] == ids
    assert got["eos"] == tok.eos_token_id
    for mine, theirs in zip(logits, got["logits"]):
        assert (torch.tensor(mine) - torch.tensor(theirs)).abs().max().item() < 1e-5


def test_existing_output_folder_is_not_overwritten(exported):
    src, out = exported
    with pytest.raises(FileExistsError, match="already exists"):
        export_llama(src, out)


def test_missing_config_is_a_clear_error(tmp_path):
    (tmp_path / "src").mkdir()
    with pytest.raises(FileNotFoundError, match="config.json"):
        export_llama(tmp_path / "src", tmp_path / "out")
    assert not (tmp_path / "out").exists()
