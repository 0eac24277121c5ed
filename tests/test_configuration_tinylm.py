"""TinyLMConfig: derived fields, presets, validation and save/load."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tinylm_hf.modeling import PRESETS, TinyLMConfig


def test_head_dim_is_derived() -> None:
    assert TinyLMConfig(hidden_size=96, num_attention_heads=6).head_dim == 16


def test_cs336_preset_has_the_assignment_sizes() -> None:
    config = TinyLMConfig.from_preset("cs336-tinystories")
    sizes = (config.hidden_size, config.intermediate_size, config.num_hidden_layers, config.num_attention_heads)
    assert sizes == (512, 1344, 4, 16)
    assert (config.max_position_embeddings, config.vocab_size, config.rope_theta) == (256, 10000, 10000.0)


def test_gpt2_small_preset() -> None:
    config = TinyLMConfig.from_preset("gpt2-small")
    assert (config.hidden_size, config.num_hidden_layers, config.num_attention_heads) == (768, 12, 12)
    assert (config.max_position_embeddings, config.vocab_size) == (1024, 50257)


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_every_preset_builds(name: str) -> None:
    config = TinyLMConfig.from_preset(name)
    assert config.head_dim * config.num_attention_heads == config.hidden_size


def test_preset_overrides_win() -> None:
    config = TinyLMConfig.from_preset("cpu-quickstart", vocab_size=321, max_position_embeddings=64)
    assert (config.vocab_size, config.max_position_embeddings) == (321, 64)
    assert config.hidden_size == PRESETS["cpu-quickstart"]["hidden_size"]


def test_unknown_preset_names_the_choices() -> None:
    with pytest.raises(ValueError, match="cpu-quickstart"):
        TinyLMConfig.from_preset("gpt5")


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("hidden_size", 0),
        ("vocab_size", -1),
        ("intermediate_size", 0),
        ("num_hidden_layers", 0),
        ("num_attention_heads", -4),
        ("max_position_embeddings", 0),
        ("rope_theta", 0.0),
        ("rms_norm_eps", -1e-6),
        ("initializer_range", 0),
        ("hidden_size", 64.0),
        ("num_hidden_layers", "4"),
        ("vocab_size", True),
        ("rope_theta", "10000"),
        ("tie_word_embeddings", "yes"),
        ("use_cache", 1),
        ("pad_token_id", 10**6),
        ("eos_token_id", "0"),
    ],
)
def test_bad_field_raises_value_error_naming_it(field: str, value: object) -> None:
    with pytest.raises(ValueError, match=field):
        TinyLMConfig(**{field: value})


def test_hidden_size_not_divisible_by_heads() -> None:
    with pytest.raises(ValueError, match="num_attention_heads"):
        TinyLMConfig(hidden_size=100, num_attention_heads=3)


def test_odd_head_dim_is_rejected_for_rope() -> None:
    with pytest.raises(ValueError, match="head_dim"):
        TinyLMConfig(hidden_size=36, num_attention_heads=4)


def test_save_and_load_round_trip(tmp_path: Path) -> None:
    config = TinyLMConfig.from_preset("cpu-quickstart", use_cache=False, tie_word_embeddings=True, eos_token_id=3)
    config.save_pretrained(tmp_path)
    saved = json.loads((tmp_path / "config.json").read_text())
    assert saved["model_type"] == "tinylm"
    loaded = TinyLMConfig.from_pretrained(tmp_path)
    assert loaded.to_dict() == config.to_dict()
    assert loaded.use_cache is False and loaded.tie_word_embeddings is True and loaded.head_dim == config.head_dim


def test_loading_a_contradicting_head_dim_fails(tmp_path: Path) -> None:
    TinyLMConfig(hidden_size=64, num_attention_heads=4).save_pretrained(tmp_path)
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "head_dim": 32}))
    with pytest.raises(ValueError, match="head_dim"):
        TinyLMConfig.from_pretrained(tmp_path)


def test_auto_config_knows_tinylm() -> None:
    from transformers import AutoConfig

    assert isinstance(AutoConfig.for_model("tinylm", hidden_size=64, num_attention_heads=4), TinyLMConfig)


@pytest.mark.parametrize("field", ["rope_theta", "rms_norm_eps", "initializer_range"])
@pytest.mark.parametrize("value", [float("nan"), float("inf")], ids=["nan", "inf"])
def test_non_finite_floats_are_refused(field: str, value: float) -> None:
    with pytest.raises(ValueError, match=f"{field} must be a finite positive number"):
        TinyLMConfig(**{field: value})


def test_a_60m_position_folder_is_refused_before_its_tables_are_allocated(tmp_path: Path) -> None:
    TinyLMConfig(hidden_size=64, num_attention_heads=2, intermediate_size=64).save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**config, "max_position_embeddings": 60_000_000}))
    with pytest.raises(ValueError, match="max_position_embeddings=60,000,000 would allocate 7.2 GiB"):
        TinyLMConfig.from_pretrained(tmp_path)
