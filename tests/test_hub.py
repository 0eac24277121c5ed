"""Model card and `tinylm push`, with the Hub client replaced at the network edge (HfApi methods)."""

from __future__ import annotations

import re

import json
import shutil

import pytest
from conftest import run_cli_error
from huggingface_hub import HfApi, ModelCard
from tiny_folders import REPO_ROOT, make_tiny_folder, run_fresh

from tinylm_hf.cli import main
from tinylm_hf.publish import check_repo_id, render_model_card
from tinylm_hf.publish.model_card import TEMPLATE_PATH
from tinylm_hf.training import DataProvenance, RunSummary

pytestmark = pytest.mark.contract  # run again on every dependency floor (.ci/run)

REPO_ID = "alice/tinylm-stories"


class HubRecorder:
    """Stands in for the Hub: records what HfApi would send, keeps the uploaded bytes."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict]] = []
        self.files: dict[str, bytes] = {}

    def create_repo(self, _api, repo_id, **kwargs):
        self.calls.append(("create_repo", {"repo_id": repo_id, **kwargs}))

    def create_branch(self, _api, repo_id, **kwargs):
        self.calls.append(("create_branch", {"repo_id": repo_id, **kwargs}))

    def create_commit(self, _api, repo_id, operations, **kwargs):
        operations = list(operations)
        self.calls.append(("create_commit", {"repo_id": repo_id, "paths": [op.path_in_repo for op in operations], **kwargs}))
        for op in operations:
            with op.as_file() as f:
                self.files[op.path_in_repo] = f.read()


@pytest.fixture()
def hub(monkeypatch):
    recorder = HubRecorder()
    for name in ("create_repo", "create_branch", "create_commit"):
        monkeypatch.setattr(HfApi, name, lambda self, *a, _n=name, **k: getattr(recorder, _n)(self, *a, **k))
    return recorder


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return make_tiny_folder(tmp_path_factory.mktemp("hub") / "model")


@pytest.fixture()
def fresh_copy(folder, tmp_path):
    return shutil.copytree(folder, tmp_path / "model")


def test_top_level_template_is_the_packaged_one():
    assert (REPO_ROOT / "model_card.md").read_text(encoding="utf-8") == TEMPLATE_PATH.read_text(encoding="utf-8")


def run_summary(**data) -> RunSummary:
    """A RunSummary like `train` returns, for a run on the given data."""
    return RunSummary(
        run_id="abc", out_dir="/home/alice/runs/exp1", iterations=200, tokens=1_638_400, context_length=256,
        batch_size=32, loss=2.1, val_loss=2.25, val_perplexity=9.4877, val_bpb=0.81, elapsed_s=95.5,
        data=DataProvenance(**data), train_config={"max_lr": 1e-3, "min_lr": 1e-4, "warmup_iters": 20,
                                                   "weight_decay": 0.1, "grad_clip": 1.0, "seed": 1337,
                                                   "dtype": "float32"},
    )


def test_card_metadata_round_trips(folder):
    results = {"perplexity": 12.5, "bits_per_byte": 1.25, "cross_entropy": 2.526, "dataset": "TinyStories valid"}
    card = render_model_card(folder, repo_id=REPO_ID, eval_results=results)
    data = ModelCard(str(card)).data
    assert data.library_name == "transformers" and data.pipeline_tag == "text-generation"
    assert {"tinylm", "custom_code"} <= set(data.tags)
    assert {r.metric_type: r.metric_value for r in data.eval_results} == {"perplexity": 12.5, "bits_per_byte": 1.25, "cross_entropy": 2.526}
    assert f'AutoModelForCausalLM.from_pretrained("{REPO_ID}", trust_remote_code=True)' in card.text
    assert "| Hidden size | 32 |" in card.text


def test_card_states_the_transformers_its_code_needs(folder):
    from tinylm_hf.compat import TRANSFORMERS_REQUIREMENT

    card = render_model_card(folder, repo_id=REPO_ID)
    assert f"`transformers{TRANSFORMERS_REQUIREMENT}`" in card.text


def test_card_without_a_run_claims_no_data_or_licence(folder):
    card = render_model_card(folder, repo_id=REPO_ID)
    assert card.data.datasets is None and card.data.license == "unknown"
    assert "Licence of the data: unknown." in card.text and "TinyStories" not in card.text


def test_card_names_tinystories_and_its_licence_only_for_tinystories(folder):
    card = render_model_card(folder, run_summary(input_files=["tinystories_train_small.txt"], train_tokens=1000))
    assert card.data.datasets == ["roneneldan/TinyStories"] and "CDLA-Sharing-1.0" in card.text
    own = render_model_card(folder, run_summary(input_files=["my_corpus.txt"], train_tokens=5000, documents=12))
    assert own.data.datasets is None and "TinyStories" not in own.text and "children" not in own.text
    assert "my_corpus.txt (5,000 training tokens in 12 documents)" in own.text
    assert "Licence of the data: unknown." in own.text and "/home/alice" not in own.text


def test_push_uploads_one_commit_that_loads_from_a_fresh_folder(fresh_copy, hub, tmp_path):
    (fresh_copy / "optimizer.pt").write_bytes(b"not for the hub")
    (fresh_copy / "eval_results.json").write_text(json.dumps({"summary": {"perplexity": 9.0, "bits_per_byte": 1.1}}))
    assert main(["push", str(fresh_copy), "--repo-id", REPO_ID, "--private", "--revision", "v1"]) == 0
    assert [name for name, _ in hub.calls] == ["create_repo", "create_branch", "create_commit"]
    assert hub.calls[0][1]["private"] is True
    commit = hub.calls[2][1]
    assert commit["repo_id"] == REPO_ID and commit["revision"] == "v1"
    paths = set(commit["paths"])
    assert {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json", "vocab.json",
            "merges.txt", "configuration_tinylm.py", "modeling_tinylm.py", "tokenization_tinylm.py", "README.md"} <= paths
    assert "optimizer.pt" not in paths and commit["paths"].count("README.md") == 1
    card = ModelCard(hub.files["README.md"].decode("utf-8"))
    assert card.data.library_name == "transformers" and "custom_code" in card.data.tags
    assert {r.metric_type: r.metric_value for r in card.data.eval_results} == {"perplexity": 9.0, "bits_per_byte": 1.1}

    download = tmp_path / "download"
    download.mkdir()
    for name, content in hub.files.items():
        (download / name).write_bytes(content)
    code = f"""
import sys
from transformers import AutoModelForCausalLM, AutoTokenizer
try:
    import tinylm_hf
    raise SystemExit("tinylm_hf must not be importable here")
except ImportError:
    pass
model = AutoModelForCausalLM.from_pretrained({str(download)!r}, trust_remote_code=True)
tok = AutoTokenizer.from_pretrained({str(download)!r}, trust_remote_code=True)
out = model.generate(**tok("Once upon a time", return_tensors="pt"), max_new_tokens=3, do_sample=False)
print(type(model).__name__, out.shape[1])
"""
    from transformers import AutoTokenizer

    prompt_length = len(AutoTokenizer.from_pretrained(fresh_copy)("Once upon a time")["input_ids"])
    assert run_fresh(code, tmp_path).stdout.split()[-2:] == ["TinyLMForCausalLM", str(prompt_length + 3)]


def test_dry_run_lists_files_and_sends_nothing(fresh_copy, hub, capsys):
    assert main(["push", str(fresh_copy), "--repo-id", REPO_ID, "--dry-run"]) == 0
    assert hub.calls == []
    out = capsys.readouterr().out
    assert "Would upload" in out and "model.safetensors" in out and "README.md" in out


@pytest.mark.parametrize("repo_id", ["no-owner", "a/b/c", "alice/", "/name", "alice/na me", "alice/..x"])
def test_bad_repo_id_fails_before_upload(fresh_copy, hub, repo_id, capsys):
    assert re.search("owner/name", run_cli_error(["push", str(fresh_copy), "--repo-id", repo_id], capsys))
    assert hub.calls == []


def test_good_repo_id_passes():
    assert check_repo_id("alice/tinylm-stories_v1.2") == "alice/tinylm-stories_v1.2"


def test_folder_without_config_fails_before_upload(fresh_copy, hub, capsys):
    (fresh_copy / "config.json").unlink()
    assert re.search("config.json", run_cli_error(["push", str(fresh_copy), "--repo-id", REPO_ID], capsys))
    assert hub.calls == []


def test_truncated_safetensors_fails_before_upload(fresh_copy, hub, capsys):
    weights = fresh_copy / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-100])
    assert re.search("model.safetensors is truncated", run_cli_error(["push", str(fresh_copy), "--repo-id", REPO_ID], capsys))
    assert hub.calls == []


def test_missing_tokenizer_fails_before_upload(fresh_copy, hub, capsys):
    for name in ("tokenizer.json", "vocab.json", "tokenizer_config.json"):
        (fresh_copy / name).unlink()
    assert re.search("tokenizer", run_cli_error(["push", str(fresh_copy), "--repo-id", REPO_ID], capsys))
    assert hub.calls == []


def test_tokenizer_larger_than_model_vocab_fails_before_upload(tmp_path, hub, capsys):
    folder = make_tiny_folder(tmp_path / "small-vocab", vocab_size=100)
    assert re.search("vocab_size is 100", run_cli_error(["push", str(folder), "--repo-id", REPO_ID], capsys))
    assert hub.calls == []


def test_card_from_training_loop_facts(folder):
    import torch

    model = torch.nn.Linear(3, 2)
    card = render_model_card(folder, run_summary(input_files=["tinystories_train_small.txt"]), model=model)
    data = ModelCard(str(card)).data
    assert {r.metric_type: r.metric_value for r in data.eval_results} == {"perplexity": 9.4877, "bits_per_byte": 0.81, "cross_entropy": 2.25}
    assert "| Parameters | 8 |" in card.text
    assert "- optimizer steps: 200" in card.text and "- tokens seen: 1,638,400" in card.text
    assert "- trained context: 256 tokens" in card.text
    assert "tinystories_train_small.txt" in card.text


def test_push_keeps_the_training_facts_of_an_existing_card(fresh_copy, hub):
    import torch

    summary = run_summary(input_files=["stories.txt"])
    summary.iterations, summary.val_loss, summary.val_perplexity, summary.val_bpb = 123, 2.5, 12.18, None
    card = render_model_card(fresh_copy, summary, model=torch.nn.Linear(2, 2))
    (fresh_copy / "README.md").write_text(str(card), encoding="utf-8")
    main(["push", str(fresh_copy), "--repo-id", REPO_ID])
    pushed = ModelCard(hub.files["README.md"].decode("utf-8"))
    assert "- optimizer steps: 123" in pushed.text and "stories.txt" in pushed.text
    assert pushed.text.count("Made for learning") == 1
    assert f'from_pretrained("{REPO_ID}", trust_remote_code=True)' in pushed.text
    assert (fresh_copy / "README.md").read_text(encoding="utf-8") == str(card)  # the local card is left as it was
    assert {r.metric_type: r.metric_value for r in pushed.data.eval_results} == {"perplexity": 12.18, "cross_entropy": 2.5}


def test_card_of_an_encoder_folder_describes_an_encoder(fresh_copy):
    config = json.loads((fresh_copy / "config.json").read_text())
    config["use_bidirectional_attention"] = True
    (fresh_copy / "config.json").write_text(json.dumps(config))
    card = render_model_card(fresh_copy, repo_id=REPO_ID)
    assert "bidirectional encoder (masked language model)" in card.text and "decoder-only" not in card.text
    assert 'pipeline("fill-mask"' in card.text and "generate(" not in card.text


def test_card_names_the_tokenizer_kind_and_the_document_end(fresh_copy):
    card = render_model_card(fresh_copy, repo_id=REPO_ID).text
    assert "a hand-written byte-level BPE tokenizer" in card and "documents ending with `<|endoftext|>`" in card
    (fresh_copy / "tokenizer_config.json").write_text(json.dumps(
        {"tokenizer_class": "TinyLMWordPieceTokenizer", "sep_token": "[SEP]", "unk_token": "[UNK]"}))
    card = render_model_card(fresh_copy, repo_id=REPO_ID).text
    assert "a hand-written WordPiece tokenizer" in card and "byte-level" not in card
    assert "documents ending with `[SEP]`" in card  # a WordPiece vocabulary has no eos: prepare ends documents with [SEP]


@pytest.mark.parametrize("bidirectional", [False, True], ids=["causal", "encoder"])
def test_card_of_a_classifier_folder_describes_a_classifier(fresh_copy, bidirectional):
    config = json.loads((fresh_copy / "config.json").read_text())
    config.update(architectures=["TinyLMForSequenceClassification"], id2label={"0": "neg", "1": "pos"},
                  use_bidirectional_attention=bidirectional)
    (fresh_copy / "config.json").write_text(json.dumps(config))
    card = render_model_card(fresh_copy, repo_id=REPO_ID)
    assert card.data.pipeline_tag == "text-classification" and "small text classifier" in card.text
    assert f'pipeline("text-classification", model="{REPO_ID}"' in card.text and "Labels: `neg`, `pos`." in card.text
    assert "generate(" not in card.text and "Perplexity" not in card.text and "Macro-F1" in card.text
    exported = "runs anywhere `LlamaForSequenceClassification` runs" in card.text
    assert exported is not bidirectional and ("refuses an encoder" in card.text) is bidirectional


def test_push_without_a_network_is_one_line(fresh_copy):
    """No network once printed a 73-line traceback: a real HTTP attempt now ends in one line and exit 2."""
    import os
    import subprocess
    import sys

    environ = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "HF_ENDPOINT")}
    environ.update(PYTHONPATH=str(REPO_ROOT), HF_TOKEN="hf_not_a_real_token", HF_ENDPOINT="http://127.0.0.1:9")
    proc = subprocess.run([sys.executable, "-m", "tinylm_hf.cli", "push", str(fresh_copy), "--repo-id", REPO_ID],
                          cwd=REPO_ROOT, env=environ, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert f"could not upload to {REPO_ID}" in proc.stderr


def test_push_dry_run_takes_a_masked_lm_folder_and_its_card_says_what_it_is(tmp_path, hub, capsys):
    masked = make_tiny_folder(tmp_path / "encoder", masked_lm=True)
    assert main(["push", str(masked), "--repo-id", REPO_ID, "--dry-run"]) == 0
    assert "README.md" in capsys.readouterr().out and not hub.calls
    card = render_model_card(masked, repo_id=REPO_ID)
    assert card.data.pipeline_tag == "fill-mask"


@pytest.mark.parametrize("front_matter", ["license: [unclosed", "- a list\n- not a mapping", "tags: [tinylm]\nmodel-index: 5"],
                         ids=["yaml-error", "not-a-mapping", "bad-model-index"])
def test_broken_card_front_matter_is_one_line_and_the_card_is_kept(fresh_copy, hub, capsys, front_matter):
    from tinylm_hf.publish.model_card import base_model_name

    text = f"---\n{front_matter}\n---\n# my card\n"
    (fresh_copy / "README.md").write_text(text, encoding="utf-8")
    err = run_cli_error(["push", str(fresh_copy), "--repo-id", REPO_ID, "--dry-run"], capsys)
    assert "README.md: its front matter" in err and "move README.md away" in err
    assert (fresh_copy / "README.md").read_text(encoding="utf-8") == text and not hub.calls
    with pytest.raises(ValueError, match="its front matter"):  # what sft and finetune read the base model's name with
        base_model_name(fresh_copy)
