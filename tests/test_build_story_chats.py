"""scripts/build_story_chats.py: rebuilds the bundled conversations byte for byte, and every reply is the story asked for."""

from __future__ import annotations

import importlib.util
import random

import pytest

from conftest import PACKAGE_DATA, REPO_ROOT
from tinylm_hf.corpus import split_documents
from tinylm_hf.corpus.conversations import STORY_CHATS, load_story_chats


@pytest.fixture(scope="module")
def script():
    spec = importlib.util.spec_from_file_location("build_story_chats", REPO_ROOT / "scripts" / "build_story_chats.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def stories(script, split: str) -> set[str]:
    """The bundled stories of `split`, with the script's whitespace rule (spaces around lines, blank lines dropped)."""
    text = (PACKAGE_DATA / script.SOURCES[split]).read_text(encoding="utf-8")
    return {"\n".join(line.strip() for line in doc.splitlines() if line.strip()) for doc in split_documents(text)}


def test_rebuild_gives_the_shipped_files(script, tmp_path):
    assert script.main(["--out", str(tmp_path)]) == 0
    for path in STORY_CHATS.values():
        assert (tmp_path / path.name).read_bytes() == path.read_bytes(), path.name


@pytest.mark.parametrize("split", sorted(STORY_CHATS))
def test_each_reply_tells_the_story_its_request_names(script, split):
    source = stories(script, split)
    for messages in load_story_chats(split):
        request, reply = messages[-2]["content"], messages[-1]["content"]
        if reply in source:  # "story about": the request names a character the story introduces
            name = script.NAMED.search(reply).group(2)
            assert name in request, (request, reply[:80])
        else:  # "what next": the request gives the story's first paragraph, the reply the rest
            fixed = {line for template in script.NEXT_REQUESTS for line in template.split("\n") if "{start}" not in line}
            start = next(line for line in request.split("\n") if line not in fixed)
            assert f"{start}\n{reply}" in source, (request[:80], reply[:80])


def test_story_about_asks_for_the_named_character(script):
    messages = script.story_about("Once upon a time, there was a little red fox named Rosy. She ran.", random.Random(0))
    request = messages[0]["content"]
    assert "Rosy" in request and messages[1]["content"].startswith("Once upon a time")
    assert script.story_about("The sun was hot. Everyone swam.", random.Random(0)) is None
