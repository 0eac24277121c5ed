"""lm-evaluation-harness on a saved TinyLM folder, in processes that cannot import tinylm_hf.

The CLI runs of the bundled tasks are slow (each imports lm-eval, ~30-40 s here), so they are marked
slow; one generate_until run (batched, left-padded: the path that broke when transformers renamed the
KV cache) and the task-writing helper are checked in the default run.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from tiny_folders import BUNDLED_VALID, make_tiny_folder

from tinylm_hf.evaluation.lm_eval_tasks import CLOZE_DATA, write_tasks
from tinylm_hf.corpus import split_documents
from tinylm_hf.evaluation.perplexity import evaluate_perplexity
from conftest import env_without_tinylm

pytestmark = pytest.mark.contract  # run again on every dependency floor (.ci/run)


def test_write_tasks_uses_absolute_paths(tmp_path, monkeypatch):
    data = tmp_path / "stories.txt"
    data.write_text("One story.\n<|endoftext|>\nTwo stories.\n<|endoftext|>\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    out = write_tasks("tasks", data_file="stories.txt")
    rolling = yaml.safe_load((out / "tinylm_rolling.yaml").read_text())
    cloze = yaml.safe_load((out / "tinylm_cloze.yaml").read_text())
    rows_file = Path(rolling["dataset_kwargs"]["data_files"]["test"])
    assert rows_file.is_absolute() and rolling["output_type"] == "loglikelihood_rolling"
    assert [json.loads(line)["text"] for line in rows_file.read_text().splitlines()] == ["One story.", "Two stories."]
    assert Path(cloze["dataset_kwargs"]["data_files"]["test"]) == CLOZE_DATA
    assert cloze["output_type"] == "multiple_choice"


@pytest.mark.parametrize("name, content, where", [
    ("stories.txt", "One story.\n<|endoftext|>\nTwo <|endoftext|> stories.\n", "stories.txt, line 3: the text spells '<|endoftext|>'"),
    ("stories.jsonl", '{"text": "a"}\n{"text": "b <|end|>"}\n', "stories.jsonl, line 2: the text spells '<|end|>'"),
    ("cloze.jsonl", '{"context": "A <|user|>", "choices": ["x", "y"], "label": 0}\n', "cloze.jsonl, line 1: the text spells '<|user|>'"),
    ("cloze.jsonl", '{"context": "A", "choices": ["x<|pad|>", "y"], "label": 0}\n', "cloze.jsonl, line 1: the text spells '<|pad|>'"),
], ids=["text-file", "jsonl", "cloze-context", "cloze-choice"])
def test_task_text_that_spells_a_control_token_is_refused_naming_file_and_line(tmp_path, name, content, where):
    """lm-eval's harness parses special-token text: data that spells one would reach the model as the control token."""
    data = tmp_path / name
    data.write_text(content, encoding="utf-8")
    option = {"cloze_file": data} if name.startswith("cloze") else {"data_file": data}
    with pytest.raises(ValueError, match=re.escape(where)):
        write_tasks(tmp_path / "tasks", **option)
    assert not (tmp_path / "tasks" / "tinylm_rolling.yaml").exists()


def test_missing_data_file_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        write_tasks(tmp_path, data_file=tmp_path / "nope.jsonl")


def _run_lm_eval(folder: Path, tasks_dir: Path, out: Path, batch_size: int) -> dict[str, list[dict]]:
    env = env_without_tinylm(out, HF_DATASETS_OFFLINE="1", HF_HOME=str(out / "hf_home"),
                             HF_DATASETS_CACHE=str(out / "datasets"))
    cmd = [sys.executable, "-m", "lm_eval", "--model", "hf",
           "--model_args", f"pretrained={folder},trust_remote_code=True",
           "--include_path", str(tasks_dir), "--tasks", "tinylm_rolling,tinylm_cloze",
           "--batch_size", str(batch_size), "--output_path", str(out), "--log_samples"]
    # cwd outside the repository: tinylm_hf is not importable, so the folder's own code runs.
    result = subprocess.run(cmd, cwd=out, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-4000:]
    samples = {}
    for task in ("tinylm_rolling", "tinylm_cloze"):
        (path,) = out.rglob(f"samples_{task}_*.jsonl")
        samples[task] = [json.loads(line) for line in path.read_text().splitlines()]
    return samples


@pytest.fixture(scope="module")
def lm_eval_runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("lmeval")
    folder = make_tiny_folder(root / "model")
    data = root / "stories.txt"
    docs = split_documents(BUNDLED_VALID.read_text(encoding="utf-8"))[:5]
    data.write_text("\n<|endoftext|>\n".join(docs) + "\n", encoding="utf-8")
    tasks = write_tasks(root / "tasks", data_file=data)
    runs = {}
    for bs in (1, 4):
        (root / f"bs{bs}").mkdir()
        runs[bs] = _run_lm_eval(folder, tasks, root / f"bs{bs}", bs)
    return folder, docs, runs


@pytest.mark.slow
def test_rolling_loglikelihood_equals_tinylm_eval(lm_eval_runs):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder, docs, runs = lm_eval_runs
    model, tok = AutoModelForCausalLM.from_pretrained(folder), AutoTokenizer.from_pretrained(folder)
    rows = sorted(runs[4]["tinylm_rolling"], key=lambda r: r["doc_id"])
    assert [r["target"] for r in rows] == docs
    for row, doc in zip(rows, docs):
        ours = evaluate_perplexity(model, tok, doc, batch_size=4, show_progress=False)  # stride = context
        assert float(row["filtered_resps"][0]) == pytest.approx(ours["total_loglikelihood"], rel=1e-5)
        assert row["bits_per_byte"][1] == ours["bytes"]


@pytest.mark.slow
def test_batch_sizes_one_and_four_agree(lm_eval_runs):
    _, _, runs = lm_eval_runs
    for task in ("tinylm_rolling", "tinylm_cloze"):
        one = {r["doc_id"]: r["filtered_resps"] for r in runs[1][task]}
        four = {r["doc_id"]: r["filtered_resps"] for r in runs[4][task]}
        assert one.keys() == four.keys()
        for doc_id in one:
            a = [float(x[0] if isinstance(x, list) else x) for x in one[doc_id]]
            b = [float(x[0] if isinstance(x, list) else x) for x in four[doc_id]]
            assert a == pytest.approx(b, rel=1e-5)


@pytest.mark.slow
def test_cloze_task_scores_every_item(lm_eval_runs):
    _, _, runs = lm_eval_runs
    rows = runs[4]["tinylm_cloze"]
    assert len(rows) == len(CLOZE_DATA.read_text().splitlines())
    assert all(len(r["filtered_resps"]) == len(r["doc"]["choices"]) for r in rows)
    assert all(r["acc"] in (0.0, 1.0) for r in rows)


GENERATE_TASK = """\
task: tinylm_continue
dataset_path: json
dataset_kwargs:
  data_files:
    test: {rows}
test_split: test
output_type: generate_until
doc_to_text: "{{{{prompt}}}}"
doc_to_target: "{{{{prompt}}}}"
generation_kwargs:
  until: ["\\n\\n"]
  max_gen_toks: 12
  do_sample: false
metric_list:
  - metric: exact_match
"""

GENERATE_SCRIPT = """
import json, sys
import lm_eval
from lm_eval.tasks import TaskManager
folder, tasks = sys.argv[1], sys.argv[2]
results = lm_eval.simple_evaluate(
    model="hf", model_args=f"pretrained={folder},trust_remote_code=True", tasks=["tinylm_continue"], device="cpu",
    batch_size=4, task_manager=TaskManager(include_path=tasks), log_samples=True,
)
rows = results["samples"]["tinylm_continue"]
print(json.dumps({row["doc"]["prompt"]: row["resps"][0][0] for row in rows}))
"""


def test_generate_until_on_a_left_padded_batch_equals_each_prompt_alone(tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = make_tiny_folder(tmp_path / "model", max_position_embeddings=128)
    docs = split_documents(BUNDLED_VALID.read_text(encoding="utf-8"))[:6]
    prompts = [" ".join(doc.split()[: 3 + 2 * i]) for i, doc in enumerate(docs)]  # lengths differ: left padding
    rows = tmp_path / "prompts.jsonl"
    rows.write_text("".join(json.dumps({"prompt": p}) + "\n" for p in prompts), encoding="utf-8")
    (tmp_path / "tasks").mkdir()
    (tmp_path / "tasks" / "tinylm_continue.yaml").write_text(GENERATE_TASK.format(rows=rows))
    (tmp_path / "script.py").write_text(GENERATE_SCRIPT)
    env = env_without_tinylm(tmp_path, HF_DATASETS_OFFLINE="1", HF_HOME=str(tmp_path / "hf_home"),
                             HF_DATASETS_CACHE=str(tmp_path / "datasets"), TQDM_DISABLE="1")
    result = subprocess.run([sys.executable, str(tmp_path / "script.py"), str(folder), str(tmp_path / "tasks")],
                            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-4000:]
    batched = json.loads(result.stdout.strip().splitlines()[-1])
    model, tok = AutoModelForCausalLM.from_pretrained(folder).eval(), AutoTokenizer.from_pretrained(folder)
    for prompt in prompts:
        ids = tok(prompt, return_tensors="pt")["input_ids"]
        new = model.generate(ids, max_new_tokens=12, do_sample=False, pad_token_id=tok.pad_token_id)[0, ids.shape[1]:]
        alone = tok.decode(new).split("\n\n")[0].split(tok.eos_token)[0]
        assert batched[prompt] == alone, prompt
