"""tinylm_hf.compat: the supported transformers range, the KV cache under both names, and remote
code that says what it needs on an unsupported transformers."""

from __future__ import annotations

import ast
import inspect
import os
import re
import subprocess
import sys
import textwrap
import tomllib
import warnings
from pathlib import Path

import pytest
import torch

import tinylm_hf
from tinylm_hf import compat
from tinylm_hf.compat import CACHE_NAME, TRANSFORMERS_REQUIREMENT, require_supported_transformers
from conftest import REPO_ROOT, env_without_tinylm
from tiny_folders import BUNDLED_VALID, make_tiny_folder
from tiny_models import make_model, random_ids

pytestmark = pytest.mark.contract  # run again on every dependency floor (.ci/run)

FAMILIES = ("bpe", "wordpiece", "unigram", "sentencepiece-bpe")


# ---------------------------------------------------------------- the range


def test_pyproject_declares_the_range_compat_enforces() -> None:
    dependencies = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    transformers = [d for d in dependencies if re.match(r"transformers\b", d)]
    assert transformers == [f"transformers{TRANSFORMERS_REQUIREMENT}"]


@pytest.mark.parametrize("version", ["5.25.0rc1", "5.24.0", "5.10.1", "4.57.6"])
def test_transformers_release_reads_the_numeric_part(version: str) -> None:
    expected = {"5.25.0rc1": (5, 25, 0), "5.24.0": (5, 24, 0), "5.10.1": (5, 10, 1), "4.57.6": (4, 57, 6)}
    assert compat.transformers_release(version) == expected[version]


@pytest.mark.parametrize("version", ["4.57.6", "5.9.0", "5.10.0"])
def test_an_older_transformers_is_refused_with_what_to_install(version: str) -> None:
    with pytest.raises(ImportError) as raised:
        require_supported_transformers(version)
    message = str(raised.value)
    assert "\n" not in message
    assert f"needs transformers{TRANSFORMERS_REQUIREMENT}; found {version}" in message
    assert f"pip install 'transformers{TRANSFORMERS_REQUIREMENT}'" in message


def test_a_newer_transformers_warns_that_nobody_tested_it() -> None:
    with pytest.warns(UserWarning, match=r"tested with transformers>=.*found 5\.26\.0"):
        require_supported_transformers("5.26.0")


def test_the_installed_transformers_is_supported_quietly() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        require_supported_transformers()


# ---------------------------------------------------------------- the KV cache under both names


def test_the_cache_name_follows_the_installed_release() -> None:
    assert CACHE_NAME == ("cache" if compat.INSTALLED_RELEASE >= (5, 24) else "past_key_values")


@pytest.mark.parametrize("name", ["cache", "past_key_values"])
def test_the_model_continues_from_a_cache_passed_under_either_name(name: str) -> None:
    model, ids = make_model(seed=3), random_ids(2, 8)
    with torch.no_grad():
        full = model(ids).logits
        first = model(ids[:, :5], use_cache=True)
        rest = model(ids[:, 5:], use_cache=True, **{name: getattr(first, CACHE_NAME)}).logits
    assert (rest - full[:, 5:]).abs().max() < 1e-5


@pytest.mark.skipif(CACHE_NAME != "cache", reason="past_key_values is the current name before transformers 5.24")
def test_a_cache_passed_under_the_old_name_warns_as_transformers_models_do() -> None:
    model, ids = make_model(seed=3), random_ids(1, 4)
    with torch.no_grad():
        cache = model(ids, use_cache=True).cache
        with pytest.warns(FutureWarning, match="`past_key_values` is deprecated"):
            model(ids, past_key_values=cache)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            model(ids, cache=cache)


def test_a_cache_passed_under_both_names_is_refused() -> None:
    model, ids = make_model(seed=3), random_ids(1, 4)
    with torch.no_grad():
        cache = getattr(model(ids, use_cache=True), CACHE_NAME)
        with pytest.raises(ValueError, match="pass the KV cache once"):
            model(ids, cache=cache, past_key_values=cache)


@pytest.mark.parametrize("which", ["causal-lm", "bare"])
def test_outputs_carry_the_cache_under_the_installed_field_name(which: str) -> None:
    model = make_model(seed=3)
    model = model if which == "causal-lm" else model.model
    with torch.no_grad():
        out = model(random_ids(1, 4), use_cache=True)
    assert CACHE_NAME in out.keys() and getattr(out, CACHE_NAME).get_seq_length() == 4


def test_trainer_drops_the_cache_from_evaluation_outputs() -> None:
    assert make_model().config.keys_to_ignore_at_inference == [CACHE_NAME]


# ---------------------------------------------------------------- remote code entry files


def remote_code_entry_files() -> list[Path]:
    """The files a saved folder's auto_map names: those of every TinyLM class the package exports."""
    classes = [getattr(tinylm_hf, name) for name in tinylm_hf.__all__ if name.startswith("TinyLM")]
    return sorted({Path(inspect.getfile(cls)) for cls in classes if isinstance(cls, type)})


def relative_imports(path: Path) -> list[str]:
    """The sibling modules a file imports with `from .x import` anywhere in it, inside functions too, in order:
    what transformers copies (it finds them with a regular expression over every line)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = [node for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module]
    return list(dict.fromkeys(node.module for node in sorted(found, key=lambda node: node.lineno)))


def reached_siblings(path: Path) -> set[str]:
    reached, todo = set(), [path]
    while todo:
        for name in relative_imports(todo.pop()):
            if name not in reached:
                reached.add(name)
                todo.append(path.parent / f"{name}.py")
    return reached


def test_the_entry_files_are_the_config_models_and_tokenizers() -> None:
    names = {path.name for path in remote_code_entry_files()}
    assert {"configuration_tinylm.py", "modeling_tinylm.py", "modeling_tinylm_mlm.py", "modeling_tinylm_heads.py",
            "tokenization_tinylm.py"} <= names
    assert len(names) == 4 + 2 * len(FAMILIES)  # config, causal LM, masked LM, task heads; a slow and a fast tokenizer each


@pytest.mark.parametrize("path", remote_code_entry_files(), ids=lambda p: p.name)
def test_an_entry_file_imports_compat_before_anything_else(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    imports = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom)) and getattr(n, "module", "") != "__future__"]
    first = imports[0]
    assert isinstance(first, ast.ImportFrom) and first.level and first.module == "compat", path.name


def saved_entry_files(folder: Path) -> list[Path]:
    """The files a saved folder's auto_map names (config.json's, tokenizer_config.json's)."""
    import json

    refs = []
    for name in ("config.json", "tokenizer_config.json"):
        if (folder / name).is_file():
            for ref in json.loads((folder / name).read_text()).get("auto_map", {}).values():
                refs += ref if isinstance(ref, list) else [ref]
    return sorted({folder / f"{ref.partition('.')[0]}.py" for ref in refs if ref})


def test_a_saved_entry_file_imports_compat_first_and_names_every_module_it_reaches(saved_folders) -> None:
    # transformers < 5.10 copies only the files an entry imports itself, then fails on the rest
    for folder in sorted(set(saved_folders.values())):
        entries = saved_entry_files(Path(folder))
        assert len(entries) >= 2, folder
        for path in entries:
            assert relative_imports(path)[0] == "compat", path
            assert reached_siblings(path) == set(relative_imports(path)), path


# ---------------------------------------------------------------- a saved folder on an unsupported transformers

LOAD_EVERYTHING = textwrap.dedent(
    """
    import json, sys
    import transformers
    if len(sys.argv) > 2:
        transformers.__version__ = sys.argv[2]  # stands in for an older release
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer
    folders = json.loads(sys.argv[1])
    results = {}
    loaders = {"config": AutoConfig, "model": AutoModelForCausalLM}
    for what, folder in folders.items():
        loader = loaders.get(what, AutoTokenizer)
        try:
            loader.from_pretrained(folder, trust_remote_code=True)
            results[what] = "loaded"
        except Exception as error:
            results[what] = f"{type(error).__name__}: {error}"
    print(json.dumps({"version": transformers.__version__, "results": results}))
    """
)


@pytest.fixture(scope="module")
def saved_folders(tmp_path_factory) -> dict[str, str]:
    """A model folder (config + model + BPE tokenizer) and a tokenizer folder of every other family."""
    from tinylm_hf.tokenizer_training import train_tokenizer

    root = tmp_path_factory.mktemp("remote-compat")
    model_folder = make_tiny_folder(root / "model")
    folders = {"config": str(model_folder), "model": str(model_folder), "bpe": str(model_folder)}
    text = BUNDLED_VALID.read_text(encoding="utf-8")[:60_000]
    for family in FAMILIES[1:]:
        tokenizer = train_tokenizer(iter([text]), 400, algorithm=family, progress=False)
        tokenizer.save_pretrained(root / family)
        folders[family] = str(root / family)
    return folders


def load_in_fresh_process(python: str, folders: dict[str, str], workdir: Path, version: str | None = None) -> dict:
    import json

    script = workdir / "load_everything.py"
    script.write_text(LOAD_EVERYTHING)
    env = env_without_tinylm(workdir, HF_HOME=str(workdir / "hf_home"), TQDM_DISABLE="1")
    argv = [python, str(script), json.dumps(folders)] + ([version] if version else [])
    result = subprocess.run(argv, cwd=workdir, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def assert_every_load_refused(report: dict) -> None:
    expected = f"ImportError: this model's code needs transformers{TRANSFORMERS_REQUIREMENT}; found {report['version']}: "
    assert set(report["results"]) == {"config", "model", *FAMILIES}
    for what, outcome in report["results"].items():
        assert outcome.startswith(expected) and "\n" not in outcome, f"{what}: {outcome}"


def test_a_saved_folder_refuses_an_older_transformers_in_one_line(saved_folders, tmp_path: Path) -> None:
    report = load_in_fresh_process(sys.executable, saved_folders, tmp_path, version="5.9.0")
    assert_every_load_refused(report)


def test_a_saved_folder_still_loads_on_the_installed_transformers(saved_folders, tmp_path: Path) -> None:
    report = load_in_fresh_process(sys.executable, saved_folders, tmp_path)
    assert set(report["results"].values()) == {"loaded"}, report


OLD_PYTHON = os.environ.get("TINYLM_OLD_TRANSFORMERS_PYTHON")


@pytest.mark.skipif(not OLD_PYTHON, reason="set TINYLM_OLD_TRANSFORMERS_PYTHON to a Python with transformers 4.x")
def test_a_saved_folder_refuses_a_real_transformers_4(saved_folders, tmp_path: Path) -> None:
    report = load_in_fresh_process(OLD_PYTHON, saved_folders, tmp_path)
    assert report["version"].startswith("4.")
    assert_every_load_refused(report)
