"""`tinylm export-llama`: a plain LlamaForCausalLM folder (or a Llama task head), loaded without remote code or
tinylm_hf."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import env_without_tinylm, run_cli_error
from tiny_folders import make_tiny_folder, run_fresh, sentencepiece_folder

from tinylm_hf.cli import main
from tinylm_hf.publish import export_llama

pytestmark = pytest.mark.contract  # run again on every dependency floor (.ci/run)

TEXTS = ["Once upon a time, a little cat said: \"Hello!\"", "Lily and Ben played in the park.<|endoftext|>Bye"]
# far from the 10000 that transformers 4.x falls back to when it cannot find rope_theta
ROPE_THETA = 500000.0


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    """{variant: (tinylm folder, exported llama folder)} for untied and tied embeddings."""
    root = tmp_path_factory.mktemp("export")
    pairs = {}
    for name, tied in (("untied", False), ("tied", True)):
        src = make_tiny_folder(root / f"tinylm-{name}", tie_word_embeddings=tied, seed=int(tied), rope_theta=ROPE_THETA)
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


def test_folder_carries_what_transformers_4_reads(exports):
    _, out = exports["untied"]
    config = json.loads((out / "config.json").read_text())
    assert config["rope_theta"] == config["rope_parameters"]["rope_theta"] == ROPE_THETA
    tokenizer_config = json.loads((out / "tokenizer_config.json").read_text())
    assert tokenizer_config["tokenizer_class"] == "PreTrainedTokenizerFast"
    assert tokenizer_config["model_input_names"] == ["input_ids", "attention_mask"]
    assert tokenizer_config["add_bos_token"] is False and tokenizer_config["add_eos_token"] is False


def test_sentencepiece_folder_keeps_its_model_file_and_ids(tmp_path):
    """llama.cpp's converter reads a Llama folder's scores from tokenizer.model (Llama 2's layout)."""
    from transformers import AutoTokenizer

    src = sentencepiece_folder(tmp_path / "src", "sentencepiece-bpe", extra_rows=0)
    assert main(["export-llama", str(src), str(tmp_path / "out")]) == 0
    assert (tmp_path / "out" / "tokenizer.model").read_bytes() == (src / "tokenizer.model").read_bytes()
    assert json.loads((tmp_path / "out" / "tokenizer_config.json").read_text())["add_bos_token"] is False
    ours, plain = AutoTokenizer.from_pretrained(src), AutoTokenizer.from_pretrained(tmp_path / "out")
    for text in [*TEXTS, "  two  spaces and Æsir 東京 🌍"]:
        assert plain(text)["input_ids"] == ours(text)["input_ids"]


def test_a_chat_model_keeps_its_template_and_where_it_stops(tmp_path):
    from tiny_chats import make_chat_folder
    from transformers import AutoTokenizer

    src = make_chat_folder(tmp_path / "src")
    (src / "generation_config.json").write_text(json.dumps({"eos_token_id": [7, 0], "max_new_tokens": 9}))
    assert main(["export-llama", str(src), str(tmp_path / "out")]) == 0
    messages = [{"role": "user", "content": "A story?"}]
    ours, plain = AutoTokenizer.from_pretrained(src), AutoTokenizer.from_pretrained(tmp_path / "out")
    assert plain.apply_chat_template(messages, add_generation_prompt=True)["input_ids"] == \
        ours.apply_chat_template(messages, add_generation_prompt=True)["input_ids"]
    assert json.loads((tmp_path / "out" / "generation_config.json").read_text())["eos_token_id"] == [7, 0]


def test_tokenizer_with_another_pattern_is_refused(exports, tmp_path):
    import shutil

    from tinylm_hf import TinyLMTokenizer

    src = tmp_path / "gpt4"
    shutil.copytree(exports["untied"][0], src)
    (src / "tokenizer.json").unlink()
    TinyLMTokenizer(str(src / "vocab.json"), str(src / "merges.txt"), pattern="gpt4").save_pretrained(src)
    with pytest.raises(ValueError, match="pattern 'gpt4'.*only GPT-2's pattern"):
        export_llama(src, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def make_venv(root: Path, packages: list[str]) -> Path:
    """A throwaway virtual environment with `packages` from pip; the test skips when pip cannot install them."""
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True)
    python = venv / "bin" / "python"
    result = subprocess.run([str(python), "-m", "pip", "install", "-q", *packages],
                            capture_output=True, text=True, timeout=1800)
    if result.returncode != 0:
        pytest.skip(f"pip could not install {packages}: {result.stderr[-500:]}")
    return python


def run_in(python: Path, code: str, cwd: Path) -> dict:
    """Run code with another interpreter (tinylm_hf unimportable, offline); returns the JSON of its last line."""
    env = env_without_tinylm(cwd, HF_HOME=str(cwd / "hf_home"))
    result = subprocess.run([str(python), "-c", code], cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
    if result.returncode != 0:
        raise AssertionError(f"{python} failed:\nSTDOUT:\n{result.stdout[-2000:]}\nSTDERR:\n{result.stderr[-4000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def reference_outputs(src: Path) -> dict:
    """Token ids, logits and 8 greedy tokens per text from the TinyLM folder under this transformers (5.x)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(src)
    model = AutoModelForCausalLM.from_pretrained(src).eval()
    ids = [tok(t, add_special_tokens=False)["input_ids"] for t in TEXTS]
    with torch.no_grad():
        logits = [model(input_ids=torch.tensor([i])).logits[0] for i in ids]
        greedy = [model.generate(input_ids=torch.tensor([i]), attention_mask=torch.ones(1, len(i), dtype=torch.long),
                                 max_new_tokens=8, do_sample=False, pad_token_id=tok.eos_token_id)[0].tolist()
                  for i in ids]
    return {"ids": ids, "logits": logits, "greedy": greedy}


# Runs under the other interpreter: load FOLDER with the Auto classes, print ids, logits and greedy tokens.
# `generate(**tokenizer(...))` is how consumers call it: a stray token_type_ids would make it raise.
CONSUMER_CODE = """
import json, sys, torch, transformers
from transformers import AutoModelForCausalLM, AutoTokenizer
folder, texts = sys.argv[1], json.loads(sys.argv[2])
tok = AutoTokenizer.from_pretrained(folder)
model = AutoModelForCausalLM.from_pretrained(folder).eval()
out = {"version": transformers.__version__, "tokenizer": type(tok).__name__, "rope_theta": model.config.rope_theta,
       "ids": [], "logits": [], "greedy": []}
for text in texts:
    enc = tok(text, add_special_tokens=False, return_tensors="pt")
    with torch.no_grad():
        out["logits"].append(model(input_ids=enc["input_ids"]).logits[0].tolist())
        out["greedy"].append(model.generate(**enc, max_new_tokens=8, do_sample=False,
                                            pad_token_id=tok.eos_token_id)[0].tolist())
    out["ids"].append(enc["input_ids"][0].tolist())
print(json.dumps(out))
"""


@pytest.mark.slow
def test_transformers_4_57_gives_the_same_logits_and_tokens(exports, tmp_path_factory):
    root = tmp_path_factory.mktemp("tf4")
    python = make_venv(root, ["torch==2.13.0", "transformers==4.57.*"])
    for name, (src, out) in exports.items():
        want = reference_outputs(src)
        code = f"import sys; sys.argv = ['-', {str(out)!r}, {json.dumps(TEXTS)!r}]\n" + CONSUMER_CODE
        got = run_in(python, code, root)
        assert got["version"].startswith("4.57.") and got["tokenizer"] == "PreTrainedTokenizerFast"
        assert got["rope_theta"] == ROPE_THETA
        assert got["ids"] == want["ids"] and got["greedy"] == want["greedy"], name
        for mine, theirs in zip(want["logits"], got["logits"]):
            assert (mine - torch.tensor(theirs)).abs().max().item() < 1e-5, name


ONNX_CODE = """
import json, sys
from optimum.onnxruntime import ORTModelForCausalLM
from transformers import AutoTokenizer
folder, texts = sys.argv[1], json.loads(sys.argv[2])
tok = AutoTokenizer.from_pretrained(folder)
model = ORTModelForCausalLM.from_pretrained(folder)
out = {"ids": [], "greedy": []}
for text in texts:
    enc = tok(text, add_special_tokens=False, return_tensors="pt")
    out["ids"].append(enc["input_ids"][0].tolist())
    out["greedy"].append(model.generate(**enc, max_new_tokens=8, do_sample=False,
                                        pad_token_id=tok.eos_token_id)[0].tolist())
print(json.dumps(out))
"""


@pytest.mark.slow
def test_optimum_onnx_export_carries_the_tokenizer_and_generates_the_same_tokens(exports, tmp_path_factory):
    root = tmp_path_factory.mktemp("onnx")
    python = make_venv(root, ["torch==2.13.0", "optimum-onnx[onnxruntime]"])
    src, out = exports["untied"]
    onnx_dir = root / "onnx"
    export = subprocess.run(
        [str(python.parent / "optimum-cli"), "export", "onnx", "--model", str(out), "--task",
         "text-generation-with-past", str(onnx_dir)],
        cwd=root, env=env_without_tinylm(root, HF_HOME=str(root / "hf_home")), capture_output=True, text=True,
        timeout=900,
    )
    assert export.returncode == 0, export.stderr[-4000:]
    assert (onnx_dir / "model.onnx").is_file() and (onnx_dir / "tokenizer.json").is_file()
    want = reference_outputs(src)
    got = run_in(python, f"import sys; sys.argv = ['-', {str(onnx_dir)!r}, {json.dumps(TEXTS)!r}]\n" + ONNX_CODE, root)
    assert got["ids"] == want["ids"]
    assert got["greedy"] == want["greedy"]


@pytest.mark.parametrize("command, out", [("export-llama", "llama"), ("export-gguf", "m.gguf")])
def test_masked_lm_encoder_is_refused_before_writing(exports, tmp_path, capsys, command, out):
    """Llama and llama.cpp attend causally: an encoder trained with bidirectional attention would run wrongly."""
    src = tmp_path / "encoder"
    shutil.copytree(exports["untied"][0], src)
    config = json.loads((src / "config.json").read_text())
    (src / "config.json").write_text(json.dumps({**config, "use_bidirectional_attention": True}))
    assert "masked-LM encoder" in run_cli_error([command, str(src), str(tmp_path / out)], capsys)
    assert not (tmp_path / out).exists()


# ---------------------------------------------------------------- task heads: the Llama head of the same name

HEADS = {  # TinyLM head -> (the Llama class it exports to, the Auto class both load with)
    "TinyLMForSequenceClassification": ("LlamaForSequenceClassification", "AutoModelForSequenceClassification"),
    "TinyLMForTokenClassification": ("LlamaForTokenClassification", "AutoModelForTokenClassification"),
    "TinyLMForQuestionAnswering": ("LlamaForQuestionAnswering", "AutoModelForQuestionAnswering"),
}
LABELS = {"id2label": {0: "tinystories", 1: "shakespeare", 2: "novel"},
          "label2id": {"tinystories": 0, "shakespeare": 1, "novel": 2}}
PADDED_TEXTS = ["Once upon a time, a little cat said hello.", "Lily played.", "Ben and the big red ball"]


@pytest.fixture(scope="module")
def head_exports(exports, tmp_path_factory) -> dict[str, tuple[Path, Path]]:
    """{head class: (TinyLM folder of that head on the untied model's decoder, its exported Llama folder)}."""
    import tinylm_hf
    from transformers import AutoTokenizer

    root, lm = tmp_path_factory.mktemp("export-heads"), exports["untied"][0]
    pairs = {}
    for name in HEADS:
        torch.manual_seed(1)
        head = getattr(tinylm_hf, name).from_pretrained(lm, **(LABELS if "Sequence" in name else {}))
        with torch.no_grad():  # biases start at zero: move them so that the export must carry them
            for param in head.parameters():
                if param.dim() == 1:
                    param.add_(0.1 * torch.randn_like(param))
        src, out = root / name, root / f"llama-{name}"
        head.save_pretrained(src)
        AutoTokenizer.from_pretrained(lm).save_pretrained(src)
        assert main(["export-llama", str(src), str(out)]) == 0
        pairs[name] = (src, out)
    return pairs


@pytest.mark.parametrize("head", list(HEADS))
def test_a_head_exports_to_the_llama_head_without_remote_code(head_exports, head):
    from safetensors import safe_open

    _, out = head_exports[head]
    config = json.loads((out / "config.json").read_text())
    assert config["architectures"] == [HEADS[head][0]] and "auto_map" not in config and not list(out.glob("*.py"))
    with safe_open(out / "model.safetensors", "pt") as weights:
        decoder = {key.split(".")[0] for key in weights.keys() if "layers" in key}
    assert decoder == {"transformer" if "Question" in head else "model"}  # Llama's names for the decoder
    if "Sequence" in head:
        assert config["id2label"] == {str(k): v for k, v in LABELS["id2label"].items()}


def padded_outputs(model, tokenizer) -> tuple[list, list]:
    """(attention mask, outputs) of a right-padded batch of PADDED_TEXTS: pooled logits, or per-token logits."""
    enc = tokenizer(PADDED_TEXTS, padding=True, return_tensors="pt")
    with torch.no_grad():
        out = model(**enc)
    tensors = [out.start_logits, out.end_logits] if hasattr(out, "start_logits") else [out.logits]
    return enc["attention_mask"].tolist(), [t.tolist() for t in tensors]


def assert_same_outputs(mask: list, mine: list, theirs: list, name: str) -> None:
    """Equal to 1e-5 wherever a token is real (a sequence head's logits have no token axis: all of them)."""
    for a, b in zip(mine, theirs):
        a, b = torch.tensor(a), torch.tensor(b)
        keep = torch.tensor(mask).bool() if a.shape[:2] == torch.tensor(mask).shape else slice(None)
        assert (a[keep] - b[keep]).abs().max().item() < 1e-5, name


HEAD_CONSUMER = """
import json, sys, torch, transformers
from transformers import AutoTokenizer
folders, texts = json.loads(sys.argv[1]), json.loads(sys.argv[2])
out = {"version": transformers.__version__}
for name, (folder, auto) in folders.items():
    tok = AutoTokenizer.from_pretrained(folder)
    model = getattr(transformers, auto).from_pretrained(folder).eval()
    enc = tok(texts, padding=True, return_tensors="pt")
    with torch.no_grad():
        res = model(**enc)
    tensors = [res.start_logits, res.end_logits] if hasattr(res, "start_logits") else [res.logits]
    out[name] = {"cls": type(model).__name__, "outputs": [x.tolist() for x in tensors],
                 "id2label": {str(k): v for k, v in model.config.id2label.items()}}
print(json.dumps(out))
"""


def reference_head_outputs(head_exports) -> dict:
    import tinylm_hf
    from transformers import AutoTokenizer

    return {name: padded_outputs(getattr(tinylm_hf, name).from_pretrained(src).eval(),
                                 AutoTokenizer.from_pretrained(src))
            for name, (src, _) in head_exports.items()}


def test_exported_heads_give_the_same_outputs_in_a_process_without_tinylm_hf(head_exports, tmp_path):
    want = reference_head_outputs(head_exports)
    folders = {name: (str(out), HEADS[name][1]) for name, (_, out) in head_exports.items()}
    code = f"import sys; sys.argv = ['-', {json.dumps(folders)!r}, {json.dumps(PADDED_TEXTS)!r}]\n" + HEAD_CONSUMER
    got = json.loads(run_fresh(code, tmp_path).stdout.strip().splitlines()[-1])
    for name, (mask, outputs) in want.items():
        assert got[name]["cls"] == HEADS[name][0]
        assert_same_outputs(mask, outputs, got[name]["outputs"], name)
    assert got["TinyLMForSequenceClassification"]["id2label"] == {str(k): v for k, v in LABELS["id2label"].items()}


def test_gguf_export_of_a_head_is_refused_before_writing(head_exports, tmp_path, capsys):
    src, _ = head_exports["TinyLMForSequenceClassification"]
    assert "task head" in run_cli_error(["export-gguf", str(src), str(tmp_path / "m.gguf")], capsys)
    assert not (tmp_path / "m.gguf").exists()


PIPELINES_457 = """
import json, sys
from transformers import pipeline
folders = json.loads(sys.argv[1])
classify = pipeline("text-classification", model=folders["TinyLMForSequenceClassification"][0])
answer = pipeline("question-answering", model=folders["TinyLMForQuestionAnswering"][0])
context = "Lily and Ben played in the park."
print(json.dumps({"label": classify("Once upon a time")[0]["label"], "context": context,
                  "answer": answer(question="Who played?", context=context)}))
"""


@pytest.mark.slow
def test_transformers_4_57_runs_the_exported_heads_and_their_pipelines(head_exports, tmp_path_factory):
    """The question-answering pipeline left transformers in 5.3: 4.57 runs it on the exported Llama head."""
    root = tmp_path_factory.mktemp("tf4-heads")
    old = os.environ.get("TINYLM_OLD_TRANSFORMERS_PYTHON")  # .ci/run's transformers 4.57 virtualenv, if made
    python = Path(old) if old else make_venv(root, ["torch==2.13.0", "transformers==4.57.*"])
    folders = {name: (str(out), HEADS[name][1]) for name, (_, out) in head_exports.items()}
    got = run_in(python, f"import sys; sys.argv = ['-', {json.dumps(folders)!r}, {json.dumps(PADDED_TEXTS)!r}]\n"
                 + HEAD_CONSUMER, root)
    assert got["version"].startswith("4.57.")
    for name, (mask, outputs) in reference_head_outputs(head_exports).items():
        assert got[name]["cls"] == HEADS[name][0]
        assert_same_outputs(mask, outputs, got[name]["outputs"], name)
    ran = run_in(python, f"import sys; sys.argv = ['-', {json.dumps(folders)!r}]\n" + PIPELINES_457, root)
    assert ran["label"] in LABELS["label2id"]
    span = ran["answer"]
    assert ran["context"][span["start"] : span["end"]] == span["answer"] and span["answer"]
