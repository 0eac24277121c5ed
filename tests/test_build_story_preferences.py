"""scripts/build_story_preferences.py: rebuilds the bundled preference pairs byte for byte; each chosen story is
about the character the request names and each rejected one about another."""

from __future__ import annotations

import importlib.util

import pytest

from conftest import REPO_ROOT
from tinylm_hf.corpus.preferences import STORY_PREFERENCES, load_preferences


@pytest.fixture(scope="module")
def script():
    path = REPO_ROOT / "scripts" / "build_story_preferences.py"
    spec = importlib.util.spec_from_file_location("build_story_preferences", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_rebuild_gives_the_shipped_files(script, tmp_path):
    assert script.main(["--out", str(tmp_path)]) == 0
    for path in STORY_PREFERENCES.values():
        assert (tmp_path / path.name).read_bytes() == path.read_bytes(), path.name


@pytest.mark.parametrize("split", sorted(STORY_PREFERENCES))
def test_chosen_tells_of_the_named_character_and_rejected_of_another(script, split):
    pairs = load_preferences(STORY_PREFERENCES[split])
    assert len(pairs) > 100
    for pair in pairs:
        request = pair["prompt"][-1]["content"]
        chosen, rejected = pair["chosen"][0]["content"], pair["rejected"][0]["content"]
        assert script.NAMED.search(chosen).group(1) in request
        assert script.NAMED.search(rejected).group(1) not in request and chosen != rejected


def test_a_conversation_that_asks_what_happens_next_makes_no_pair(script):
    messages = [{"role": "user", "content": "Once there was a dog named Max.\nWhat happens next?"},
                {"role": "assistant", "content": "Max, a dog named Max, ran."}]
    assert script.named_character(messages) is None
