"""`tinylm quickstart --chat` in full: the quickstart's model, fine-tuned on the bundled story conversations, answers
requests with stories within minutes on the CPU (`-m slow`; the tiny run is in test_quickstart.py)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from conftest import REPO_ROOT


@pytest.mark.slow
def test_quickstart_chat_answers_with_stories_within_minutes(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), HF_HUB_OFFLINE="1")
    proc = subprocess.run([sys.executable, "-m", "tinylm_hf.cli", "quickstart", "--chat", "--out", str(tmp_path / "qs")],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    replies = re.findall(r"^model> (.*?)(?=\n\nyou> |\Z)", proc.stdout, flags=re.S | re.M)
    assert len(replies) == 3
    story_words = ("Once", "day", "named", "happy", "play", "friend")
    assert sum(len(r.split()) >= 20 and any(w in r for w in story_words) for r in replies) >= 2, replies
