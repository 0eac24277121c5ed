"""`tinylm export-llama`: a plain LlamaForCausalLM folder, loaded without remote code or tinylm_hf."""

from __future__ import annotations

import json

import pytest
import torch
from tiny_folders import make_tiny_folder, run_fresh

from tinylm_hf.cli import main
from tinylm_hf.publish import export_llama

TEXTS = ["Once upon a time, a little cat said: \"Hello!\"", "Lily and Ben played in the park.<|endoftext|>Bye"]


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    """{variant: (tinylm folder, exported llama folder)} for untied and tied embeddings."""
    root = tmp_path_factory.mktemp("export")
    pairs = {}
    for name, tied in (("untied", False), ("tied", True)):
        src = make_tiny_folder(root / f"tinylm-{name}", tie_word_embeddings=tied, seed=int(tied))
        out = root / f"llama-{name}"
        assert main(["export-llama", str(src), str(out)]) == 0
        pairs[name] = (src, out)
    return pairs


@pytest.mark.parametrize("variant", ["untied", "tied"])
def test_folder_has_no_remote_code(exports, variant):
    _, out = exports[variant]
    config = json.loads((out / "config.json").read_text())
    assert config["model_type"] == "llama" and config["architectures"] == ["LlamaForCausalLM"]
    assert config["tie_word_embeddings"] is (variant == "tied")
    assert "auto_map" not in config
    assert "auto_map" not in json.loads((out / "tokenizer_config.json").read_text())
    assert not list(out.glob("*.py"))
    assert (out / "model.safetensors").is_file() and (out / "tokenizer.json").is_file()


def test_logits_and_ids_match_in_a_process_without_tinylm_hf(exports, tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    expected = {}
    for name, (src, _) in exports.items():
        tok = AutoTokenizer.from_pretrained(src)
        model = AutoModelForCausalLM.from_pretrained(src).eval()
        ids = [tok(t, add_special_tokens=False)["input_ids"] for t in TEXTS]
        with torch.no_grad():
            logits = [model(input_ids=torch.tensor([i])).logits[0] for i in ids]
        expected[name] = (ids, logits, tok.eos_token_id)
    folders = {name: str(out) for name, (_, out) in exports.items()}
    code = f"""
import json, torch
from transformers import AutoModelForCausalLM, AutoTokenizer
try:
    import tinylm_hf
    raise SystemExit("tinylm_hf must not be importable here")
except ImportError:
    pass
result = {{}}
for name, folder in {folders!r}.items():
    tok = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder).eval()
    ids = [tok(t, add_special_tokens=False)["input_ids"] for t in {TEXTS!r}]
    with torch.no_grad():
        logits = [model(input_ids=torch.tensor([i])).logits[0].tolist() for i in ids]
    result[name] = {{"cls": type(model).__name__, "ids": ids, "logits": logits, "eos": tok.eos_token_id}}
print(json.dumps(result))
"""
    got = json.loads(run_fresh(code, tmp_path).stdout.strip().splitlines()[-1])
    for name, (ids, logits, eos) in expected.items():
        assert got[name]["cls"] == "LlamaForCausalLM"
        assert got[name]["ids"] == ids and got[name]["eos"] == eos
        for mine, theirs in zip(logits, got[name]["logits"]):
            assert (mine - torch.tensor(theirs)).abs().max().item() < 1e-5


def test_existing_output_folder_is_not_overwritten(exports):
    src, out = exports["untied"]
    with pytest.raises(FileExistsError, match="already exists"):
        export_llama(src, out)


def test_missing_config_is_a_clear_error(tmp_path):
    (tmp_path / "src").mkdir()
    with pytest.raises(FileNotFoundError, match="config.json"):
        export_llama(tmp_path / "src", tmp_path / "out")
    assert not (tmp_path / "out").exists()
