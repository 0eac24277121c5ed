"""tinylm_hf/training/run/ alone knows how a run is stored: its folder's files, the checkpoint format and its reader.

Read from the source, as tests/test_layout.py reads the import graph: a change of how checkpoints are stored
then touches this one package, and every other module reads a checkpoint through `read_checkpoint`.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from conftest import REPO_ROOT

RUN_PACKAGE = REPO_ROOT / "tinylm_hf" / "training" / "run"
SOURCES = sorted([*(REPO_ROOT / "tinylm_hf").rglob("*.py"), *(REPO_ROOT / "scripts").rglob("*.py")])
OUTSIDE = [path for path in SOURCES if RUN_PACKAGE not in path.parents]

# Entries of a checkpoint file that name nothing else in the code ("model" and "optimizer" name many things).
CHECKPOINT_KEYS = {"iteration", "run_id", "rng", "train_config", "model_config", "metrics", "extra"}
# Readers that hand back the file's raw dict rather than the typed `Checkpoint`.
RAW_READERS = {"load_state", "load_training_state"}
# What a run writes into its folder, as the code spells it.
RUN_FILE_NAMES = {"run.json", "summary.json", "metrics.jsonl", "loss.png", "checkpoints", "best.pt", ".lock"}
# What defines the storage: each is defined once, in the run package.
STORAGE_NAMES = ("RunDirectory", "RUN_FILE", "RUN_OUTPUTS", "SUMMARY_FILE", "METRICS_FILE", "CHECKPOINT_PATTERN",
                 "BEST_CHECKPOINT", "save_training_state", "read_checkpoint", "Checkpoint", "RunCheckpoints",
                 "TrainState", "RunSummary", "RUN_TOKENIZER_DIR", "HF_DIR", "TENSORBOARD_DIR", "CHECKPOINTS_DIR")


def where(path: Path, node: ast.AST) -> str:
    name = path.relative_to(REPO_ROOT) if REPO_ROOT in path.parents else path.name
    return f"{name}:{node.lineno} {ast.unparse(node)[:80]}"


def checkpoint_reads(path: Path) -> list[str]:
    """Where `path` loads a checkpoint or names its entries: `torch.load`, a raw reader, `x["model_config"]`, ..."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and ast.unparse(node.func) in ("torch.load", "torch.serialization.load"):
            found.append(where(path, node))
        elif isinstance(node, ast.ImportFrom) and node.module == "torch" and any(a.name == "load" for a in node.names):
            found.append(where(path, node))
        elif isinstance(node, ast.ImportFrom) and any(alias.name in RAW_READERS for alias in node.names):
            found.append(where(path, node))
        elif isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and \
                node.slice.value in CHECKPOINT_KEYS:
            found.append(where(path, node))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" and \
                node.args and isinstance(node.args[0], ast.Constant) and node.args[0].value in CHECKPOINT_KEYS:
            found.append(where(path, node))
    return found


def run_file_names(path: Path) -> list[str]:
    """The run-folder file names (`"metrics.jsonl"`, `"ckpt_..."`) spelt in `path`'s code (docstrings left out)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Expr)}
    return [where(path, node) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
            and (node.value in RUN_FILE_NAMES or "ckpt_" in node.value or node.value.endswith(".pt"))]


def top_level_names(path: Path) -> set[str]:
    """The functions, classes and constants `path` defines at module level."""
    names = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {t.id for t in targets if isinstance(t, ast.Name)}
    return names


def test_the_checks_see_a_checkpoint_read(tmp_path):
    source = tmp_path / "reader.py"
    source.write_text("import torch\nfrom tinylm_hf.training.run.checkpoint import load_state\n"
                      "state = torch.load('x.pt')\nconfig = state['model_config']\nrng = state.get('rng')\n"
                      "log = 'metrics.jsonl'\n")
    assert len(checkpoint_reads(source)) == 4
    assert len(run_file_names(source)) == 2  # 'x.pt' and 'metrics.jsonl'


def test_no_module_outside_the_run_package_loads_a_checkpoint_or_names_its_entries():
    assert [hit for path in OUTSIDE for hit in checkpoint_reads(path)] == []


def test_no_module_outside_the_run_package_spells_a_run_folder_file_name():
    assert [hit for path in OUTSIDE for hit in run_file_names(path)] == []


@pytest.mark.parametrize("name", STORAGE_NAMES)
def test_what_defines_the_storage_is_defined_once_in_the_run_package(name):
    homes = [path.relative_to(RUN_PACKAGE.parent).as_posix() for path in SOURCES if name in top_level_names(path)]
    assert len(homes) == 1 and homes[0].startswith("run/"), homes
