"""TrainConfig (training/config.py): every field of a config file or of `--model` checked by its type before a run,
and every field in one `--help` section, declared in code."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import pytest

from tinylm_hf.training.config import DATA, TrainConfig, read_config_file


def make(**fields: object) -> TrainConfig:
    return TrainConfig(data_dir="data", **fields)


@pytest.mark.parametrize(("field", "value"), [
    pytest.param("overwrite", "no", id="overwrite-no-deleted-the-run"),
    pytest.param("compile", "off", id="compile-off-compiled"),
    pytest.param("resume", "false", id="resume-string"),
    pytest.param("keep_best", 0, id="bool-as-int"),
    pytest.param("batch_size", 32.0, id="int-as-float"),
    pytest.param("max_iters", "100", id="int-as-string"),
    pytest.param("max_lr", "1e-3", id="float-as-string"),
    pytest.param("label_names", "a,b", id="list-as-string"),
    pytest.param("label_names", ["a", 1], id="list-of-mixed"),
    pytest.param("model", ["hidden_size"], id="model-as-list"),
    pytest.param("sample_prompt", 3, id="string-as-int"),
    pytest.param("time_budget_s", True, id="float-as-bool"),
])
def test_a_value_of_the_wrong_type_is_refused_naming_the_field(field: str, value: object) -> None:
    with pytest.raises(TypeError, match=f"^{field} must be"):
        make(**{field: value})


@pytest.mark.parametrize("field", ["max_lr", "min_lr", "eps", "grad_clip", "time_budget_s", "mlm_probability"])
@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf")], ids=["nan", "inf", "-inf"])
def test_non_finite_numbers_are_refused(field: str, value: float) -> None:
    with pytest.raises(ValueError, match=f"{field} must be a finite number"):
        make(**{field: value})


def test_a_string_bool_in_a_yaml_file_is_refused_before_anything_runs(tmp_path: Path) -> None:
    path = tmp_path / "run.yaml"
    path.write_text('data_dir: data\noverwrite: "no"\n', encoding="utf-8")
    with pytest.raises(TypeError, match="overwrite must be true or false"):
        TrainConfig.from_file(path)


def test_yaml_and_json_bools_and_numbers_are_accepted(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text("data_dir: d\noverwrite: no\ncompile: false\nmax_lr: 2e-3\nbatch_size: 8\n")
    (tmp_path / "b.json").write_text(json.dumps({"data_dir": "d", "overwrite": False, "max_lr": 0.002}))
    assert TrainConfig.from_file(tmp_path / "a.yaml").overwrite is False
    assert TrainConfig.from_file(tmp_path / "b.json").max_lr == 0.002


def test_infinity_in_a_json_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "run.json"
    path.write_text('{"data_dir": "d", "max_lr": Infinity}', encoding="utf-8")
    with pytest.raises(ValueError, match="max_lr must be a finite number"):
        TrainConfig.from_file(path)


def test_an_unknown_field_names_it_and_the_nearest() -> None:
    with pytest.raises(ValueError, match="unknown TrainConfig field 'overwirte'; did you mean 'overwrite'"):
        TrainConfig.from_dict({"data_dir": "d", "overwirte": True})


def test_an_unknown_model_field_names_it_and_the_nearest() -> None:
    with pytest.raises(ValueError, match="unknown TinyLMConfig field 'hidden_sise'.*did you mean 'hidden_size'"):
        make(model={"hidden_sise": 64})


@pytest.mark.parametrize(("overrides", "field"), [
    pytest.param({"hidden_size": "64"}, "hidden_size", id="int-as-string"),
    pytest.param({"tie_word_embeddings": "no"}, "tie_word_embeddings", id="bool-as-string"),
    pytest.param({"rope_theta": float("inf")}, "rope_theta", id="infinite-theta"),
    pytest.param({"rms_norm_eps": float("nan")}, "rms_norm_eps", id="nan-eps"),
])
def test_a_model_override_of_the_wrong_type_is_refused(overrides: dict, field: str) -> None:
    with pytest.raises(ValueError, match=field):
        make(model=overrides)


def test_a_60m_position_model_is_refused_before_its_tables_are_allocated() -> None:
    with pytest.raises(ValueError, match="max_position_embeddings=60,000,000 would allocate 7.2 GiB"):
        make(model={"max_position_embeddings": 60_000_000})


def test_a_60m_token_context_is_refused_before_its_tables_are_allocated() -> None:
    with pytest.raises(ValueError, match="context_length=60,000,000 would allocate"):
        make(context_length=60_000_000)


@pytest.mark.parametrize("given", [{"model": {"hidden_size": 64}}, {"preset": "cpu-quickstart"}], ids=["model", "preset"])
def test_model_shape_with_init_from_is_refused_not_ignored(given: dict) -> None:
    with pytest.raises(ValueError, match="init_from loads"):
        make(init_from="runs/x/hf", **given)


def test_a_yaml_alias_bomb_is_refused(tmp_path: Path) -> None:
    lines = ['a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 9)}]" for i in range(8)]
    path = tmp_path / "bomb.yaml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match="YAML alias \\*a at line 2.*not allowed"):
        read_config_file(path)


def test_a_huge_config_file_is_refused_unread(tmp_path: Path) -> None:
    path = tmp_path / "big.json"
    path.write_text(json.dumps({"sample_prompt": "x" * (2 << 20)}), encoding="utf-8")
    with pytest.raises(ValueError, match="a config is at most"):
        read_config_file(path)


def test_a_folder_given_as_the_config_file_is_named_as_such(tmp_path: Path) -> None:
    with pytest.raises(IsADirectoryError, match="config file .* is a directory, not a file"):
        read_config_file(tmp_path)


def model_examples_in_docs() -> list[tuple[str, str]]:
    """(file, text) of every `--model '...'` example in README.md and docs/."""
    from conftest import REPO_ROOT

    pages = [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").rglob("*.md"))]
    return [(page.relative_to(REPO_ROOT).as_posix(), match) for page in pages
            for match in re.findall(r"--model '([^']*)'", page.read_text(encoding="utf-8"))]


def model_examples_in_help(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The `e.g. {...}` examples of every command's `--model` help."""
    from tinylm_hf.cli import build_parser

    monkeypatch.setenv("COLUMNS", "10000")  # one help line per flag
    parser = build_parser()
    helps = [sub.format_help() for action in parser._subparsers._group_actions for sub in action.choices.values()]
    return [example for text in helps for line in text.splitlines() if line.lstrip().startswith("--model ")
            for example in re.findall(r"e\.g\. (\{.*?\})", line)]


def test_every_model_example_in_the_docs_and_help_is_valid_json(monkeypatch: pytest.MonkeyPatch) -> None:
    docs, helps = model_examples_in_docs(), model_examples_in_help(monkeypatch)
    assert len(docs) >= 3 and helps, (docs, helps)
    for where, text in [*docs, *(("--help", h) for h in helps)]:
        overrides = json.loads(text)  # a JSONDecodeError names the example
        make(model=overrides)  # and every key is a TinyLMConfig field of the right type


OTHER_OBJECTIVES_FIELDS = [  # (field, a value other than its default): none of them is objective clm's
    ("masking", "span"), ("mlm_probability", 0.4), ("conversations", "chats.jsonl"),
    ("val_conversations", "val.jsonl"), ("train_file", "labels.jsonl"), ("validation_file", "val.jsonl"),
    ("validation_share", 0.2), ("text_column", "sentence"), ("label_column", "y"), ("label_names", ["no", "yes"]),
    ("preferences", "pairs.jsonl"), ("val_preferences", "val.jsonl"), ("dpo_beta", 0.5),
]


@pytest.mark.parametrize(("field", "value"), OTHER_OBJECTIVES_FIELDS, ids=[f for f, _ in OTHER_OBJECTIVES_FIELDS])
def test_a_field_of_another_objective_is_refused_not_ignored(field: str, value: object) -> None:
    from tinylm_hf.training.objectives.sections import SECTIONS

    owner = next(name for name, section in SECTIONS.items() if field in section.field_names())
    with pytest.raises(ValueError, match=rf"^{field} is a setting of objective {owner} .*objective is clm"):
        make(**{field: value})


def test_an_objective_field_at_its_default_is_not_refused() -> None:
    assert make(masking="dynamic", dpo_beta=0.1).objective == "clm"


def test_muon_defaults_to_a_faster_adamw_part_than_adamw_alone() -> None:
    """With muon, max_lr is the rate of the embeddings, head and norms beside Muon's matrices: at AdamW's 1e-3 they
    held the model back (docs/benchmarks/training.md, "AdamW or Muon at tinylm train's defaults")."""
    muon, adamw = make(optimizer="muon"), make(optimizer="adamw")
    assert (muon.max_lr, muon.min_lr, muon.muon_lr) == (6e-3, pytest.approx(6e-4), 0.02)
    assert (adamw.max_lr, adamw.min_lr) == (1e-3, pytest.approx(1e-4))


def test_min_lr_defaults_to_a_tenth_of_the_max_lr_given() -> None:
    assert make(max_lr=5e-5).min_lr == pytest.approx(5e-6)
    assert make(optimizer="muon", max_lr=2e-3, min_lr=0.0).min_lr == 0.0


def test_every_field_is_in_exactly_one_section() -> None:
    """`--help` groups the flags by `field_sections`: a field in none would have no flag, in two a doubled one."""
    import dataclasses

    from tinylm_hf.training.config import field_sections

    listed = [name for names in field_sections().values() for name in names]
    assert sorted(listed) == sorted(f.name for f in dataclasses.fields(TrainConfig))
    assert len(listed) == len(set(listed))


def test_each_shared_field_declares_its_section_in_code() -> None:
    """The sections are read from the fields' annotations (`Annotated[type, Section]`), in field order, not from
    comments: the data fields first, the system fields last."""
    from tinylm_hf.training.config import SYSTEM, declared_sections
    from tinylm_hf.training.objectives.sections import SECTIONS

    own = {name for section in SECTIONS.values() for name in section.field_names()}
    declared = declared_sections(TrainConfig, skip=own)
    assert list(declared)[:3] == ["data_dir", "tokenizer_dir", "out_dir"] and declared["data_dir"] is DATA
    assert declared["report_to"] is SYSTEM


@dataclass
class SettingsMissingASection:
    data_dir: Annotated[str, DATA] = ""
    seed: int = 0


def test_a_field_without_a_section_is_named() -> None:
    from tinylm_hf.training.config import declared_sections

    with pytest.raises(TypeError, match=r"SettingsMissingASection\.seed must declare one section"):
        declared_sections(SettingsMissingASection)
