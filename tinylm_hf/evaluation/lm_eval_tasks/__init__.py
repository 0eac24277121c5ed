"""lm-evaluation-harness task definitions for local data, written with absolute paths.

lm-eval resolves a task's `data_files` relative to the current directory, so task YAMLs with
relative paths break as soon as lm-eval runs elsewhere. The YAMLs are therefore templates here and
`write_tasks` writes them into a folder with absolute paths. Two tasks ship, with their data:

- `tinylm_rolling`: `loglikelihood_rolling` (word/byte perplexity, bits per byte) over JSONL
  documents with a `text` field (default: 8 TinyStories validation stories), or over a text file
  whose documents are separated by `<|endoftext|>` lines.
- `tinylm_cloze`: a 12-item `multiple_choice` story-cloze task (JSONL: context, choices, label).

Usage (in a process that does not need tinylm_hf)::

    python -m tinylm_hf.evaluation.lm_eval_tasks /tmp/tinylm_tasks [--data-file FILE]
    lm_eval --model hf --model_args pretrained=DIR,trust_remote_code=True \
        --include_path /tmp/tinylm_tasks --tasks tinylm_rolling,tinylm_cloze --batch_size 4

lm-eval prefixes each rolling document with the bos (else eos) token, as `tinylm eval` does, so
its rolling log-likelihood equals `evaluate_perplexity(...)["total_loglikelihood"]` with
`stride == context_length` (the model's `max_position_embeddings`).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from ...corpus.documents import separator_line, split_documents
from ...fileio import write_text_atomic

TASKS_DIR = Path(__file__).resolve().parent
ROLLING_DATA = TASKS_DIR / "tinystories_valid_sample.jsonl"
CLOZE_DATA = TASKS_DIR / "tinystories_cloze.jsonl"

ROLLING_YAML = """task: {task}
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data_file}
test_split: test
output_type: loglikelihood_rolling
doc_to_text: ""
doc_to_target: "{{{{text}}}}"
metric_list:
  - metric: word_perplexity
  - metric: byte_perplexity
  - metric: bits_per_byte
metadata:
  version: 1.0
"""

CLOZE_YAML = """task: {task}
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data_file}
test_split: test
output_type: multiple_choice
doc_to_text: "{{{{context}}}}"
doc_to_choice: "{{{{choices}}}}"
doc_to_target: label
target_delimiter: " "
metric_list:
  - metric: acc
    aggregation: mean
    higher_is_better: true
  - metric: acc_norm
    aggregation: mean
    higher_is_better: true
metadata:
  version: 1.0
"""




CONTROL_TEXT = re.compile(r"<\|[^|<>\s]{1,40}\|>")  # how TinyLM spells its special tokens: <|endoftext|>, <|end|>, ...


def check_plain_data(path: Path, fields: tuple[str, ...] = ()) -> None:
    """Refuse data that spells a special token, naming the file, the line and the token.

    lm-eval's harness encodes task text with the tokenizer's defaults, which parse special-token text: a
    `<|endoftext|>` inside a document would reach the model as the control token. A text file's
    separator lines (`<|endoftext|>` alone on a line) end documents and are not text; a JSON-lines file is
    checked in `fields` of each row.
    """
    with open(path, encoding="utf-8") as fh:
        for number, line in enumerate(fh, 1):
            if fields:
                try:
                    row = json.loads(line) if line.strip() else {}
                except json.JSONDecodeError as err:
                    raise ValueError(f"{path}, line {number} is not valid JSON ({err})") from None
                line = json.dumps([row.get(f) for f in fields], ensure_ascii=False) if isinstance(row, dict) else ""
            elif separator_line().fullmatch(line.rstrip("\n")):
                continue
            found = CONTROL_TEXT.search(line)
            if found:
                raise ValueError(f"{path}, line {number}: the text spells {found.group(0)!r}, which lm-eval's harness "
                                 "encodes as a control token (it parses special-token text): remove or reword it")


def text_file_to_jsonl(text_file: Path, out: Path) -> Path:
    """Write the `<|endoftext|>`-separated documents of a text file as JSONL `{"text": ...}` rows."""
    docs = split_documents(text_file.read_text(encoding="utf-8"), rule="separator")
    if not docs:
        raise ValueError(f"{text_file} holds no documents")
    write_text_atomic(out, "".join(json.dumps({"text": d}, ensure_ascii=False) + "\n" for d in docs))
    return out


def write_tasks(
    directory: str | os.PathLike,
    *,
    data_file: str | os.PathLike | None = None,
    cloze_file: str | os.PathLike | None = None,
    rolling_task: str = "tinylm_rolling",
    cloze_task: str = "tinylm_cloze",
) -> Path:
    """Write the task YAMLs (absolute data paths) into `directory`; return it for `--include_path`.

    `data_file` is the rolling task's data: JSONL with a `text` field, or a text file with
    `<|endoftext|>`-separated documents (converted to JSONL next to the YAMLs).
    """
    directory = Path(directory).resolve()
    directory.mkdir(parents=True, exist_ok=True)
    data = Path(data_file).resolve() if data_file is not None else ROLLING_DATA
    if not data.is_file():
        raise FileNotFoundError(f"rolling-task data file {data} does not exist")
    check_plain_data(data, ("text",) if data.suffix == ".jsonl" else ())
    if data.suffix != ".jsonl":
        data = text_file_to_jsonl(data, directory / f"{rolling_task}_data.jsonl")
    cloze = Path(cloze_file).resolve() if cloze_file is not None else CLOZE_DATA
    if not cloze.is_file():
        raise FileNotFoundError(f"cloze-task data file {cloze} does not exist")
    check_plain_data(cloze, ("context", "choices"))
    write_text_atomic(directory / f"{rolling_task}.yaml", ROLLING_YAML.format(task=rolling_task, data_file=json.dumps(str(data))))
    write_text_atomic(directory / f"{cloze_task}.yaml", CLOZE_YAML.format(task=cloze_task, data_file=json.dumps(str(cloze))))
    return directory
