"""Every ```bash and ```python example in README.md and docs/ runs as written.

A block runs unless the line before its opening fence is a marker comment:

    <!-- example: slow (why) -->   minutes of work (a full quickstart, a benchmark, torchrun)
    <!-- example: skip (why) -->   needs what a test machine lacks (a GPU, the network, llama.cpp)

Marked blocks are reported as skipped tests, with their reason. A page's other blocks run in order, as
one sequence (later blocks use what earlier ones wrote), in a temporary directory laid out like the
repository root, where the examples are run from: the bundled corpus is at `tinylm_hf/data/`, and a page
that names `runs/quickstart/` finds the folders a short `tinylm quickstart` writes there.

How a block runs:
- a bash block made only of plain `tinylm ...` commands calls `tinylm_hf.cli.main`, the function the
  `tinylm` script calls, in this process: a new process spends 5-15 s importing torch and transformers
  before each command. Any other bash block runs in `bash -euo pipefail`, this interpreter's bin folder
  first on PATH. A command passes when it exits 0.
- a python block is executed in one namespace per page (doctest's model) and passes when it raises nothing.
While a page runs, the process keeps to one CPU and torch to one thread: on a busy 2-core machine, two
threads per process mostly wait on each other (a 20-step run took 87 s instead of 7 s).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import PACKAGE_DATA, REPO_ROOT

PAGES = [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").rglob("*.md"))]
FENCE = re.compile(r"^(?P<indent>\s*)```(?P<lang>[\w+-]*)\s*$")
MARKER = re.compile(r"^\s*<!-- example: (?P<kind>slow|skip) \((?P<reason>[^()]+)\) -->\s*$")
RUNNABLE = {"bash", "python"}
# languages that look runnable but would escape this test: write them as bash or python
FORBIDDEN = {"sh", "shell", "console", "zsh", "py", "python3", "pycon", "ipython"}
SHELL_ONLY = re.compile(r"[|&;<>$`*?\[~]")  # what only a shell can do with a line
QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"")
COMMENT = re.compile(r"(?:^|\s)#")
QUICKSTART_USE = "runs/quickstart/"
QUICKSTART_ARGS = ["--max-iters", "8", "--batch-size", "4", "--max-new-tokens", "16"]


@dataclass(frozen=True)
class Block:
    """One fenced code block of a page."""

    page: Path
    line: int  # 1-based line of the opening fence
    lang: str
    code: str
    marker: str | None  # "slow" / "skip", or None for a block that runs
    reason: str | None

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(REPO_ROOT)}:{self.line}"


def read_blocks(page: Path) -> list[Block]:
    """The fenced blocks of a page, each with the marker on the line before its fence."""
    lines = page.read_text(encoding="utf-8").splitlines()
    blocks, i = [], 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        indent, end = opening["indent"], i + 1
        while end < len(lines) and lines[end].strip() != "```":
            end += 1
        body = "\n".join(line[len(indent):] for line in lines[i + 1:end])
        marker = MARKER.match(lines[i - 1]) if i else None
        blocks.append(Block(page, i + 1, opening["lang"], body + "\n",
                            marker["kind"] if marker else None, marker["reason"] if marker else None))
        i = end + 1
    return blocks


def commands(code: str) -> list[str]:
    """The shell commands of a bash block: continuation lines joined, blank and comment lines dropped."""
    joined = code.replace("\\\n", " ")
    return [line.strip() for line in joined.splitlines() if line.strip() and not line.strip().startswith("#")]


def tinylm_argv(command: str) -> list[str] | None:
    """The arguments of a plain `tinylm` command (no pipes, globs, variables or redirections), else None."""
    words = shlex.split(command, comments=True)
    unquoted = COMMENT.split(QUOTED.sub("", command), maxsplit=1)[0]
    if not words or words[0] != "tinylm" or SHELL_ONLY.search(unquoted):
        return None
    return words[1:]


ALL_BLOCKS = [block for page in PAGES for block in read_blocks(page)]
EXAMPLES = [block for block in ALL_BLOCKS if block.lang in RUNNABLE]
RUN_PAGES = sorted({block.page for block in EXAMPLES if block.marker is None})


@contextmanager
def one_cpu() -> Iterator[None]:
    """Keep this process (and the processes it starts) to one CPU and torch to one thread."""
    import torch

    pinnable = hasattr(os, "sched_setaffinity")  # Linux; elsewhere only torch's threads are limited
    cpus, threads = os.sched_getaffinity(0) if pinnable else set(), torch.get_num_threads()
    if pinnable:
        os.sched_setaffinity(0, {min(cpus)})
    torch.set_num_threads(1)
    try:
        yield
    finally:
        if pinnable:
            os.sched_setaffinity(0, cpus)
        torch.set_num_threads(threads)


def lay_out_workdir(workdir: Path) -> None:
    """A directory like the repository root for the examples: the bundled corpus at tinylm_hf/data/."""
    (workdir / "tinylm_hf").mkdir(parents=True)
    (workdir / "tinylm_hf" / "data").symlink_to(PACKAGE_DATA, target_is_directory=True)


@pytest.fixture(scope="session")
def quickstart_runs(tmp_path_factory) -> Path:
    """`runs/` after a short `tinylm quickstart`: the model folder the how-to pages use."""
    from tinylm_hf.cli import main

    workdir = tmp_path_factory.mktemp("quickstart")
    with one_cpu():
        assert main(["quickstart", "--out", str(workdir / "runs" / "quickstart"), *QUICKSTART_ARGS]) == 0
    return workdir / "runs"


def run_bash(block: Block, workdir: Path) -> None:
    """Run a bash block: in-process when every command is a plain `tinylm` one, else in bash."""
    from tinylm_hf.cli import main

    argvs = [tinylm_argv(command) for command in commands(block.code)]
    if argvs and all(argv is not None for argv in argvs):
        for argv in argvs:
            try:
                code = main(argv)
            except SystemExit as exit_:  # argparse's exit on a bad flag
                code = exit_.code
            assert code == 0, f"{block.where}: `tinylm {shlex.join(argv)}` exited {code}"
        return
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    result = subprocess.run(["bash", "-euo", "pipefail", "-c", block.code], cwd=workdir, env=env,
                            capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL)
    assert result.returncode == 0, f"{block.where} exited {result.returncode}:\n{result.stdout}\n{result.stderr}"


def run_python(block: Block, namespace: dict) -> None:
    """Run a python block in the page's namespace."""
    exec(compile(block.code, block.where, "exec"), namespace)


@pytest.mark.parametrize("page", RUN_PAGES, ids=[str(p.relative_to(REPO_ROOT)) for p in RUN_PAGES])
def test_the_examples_of_a_page_run(page, tmp_path, monkeypatch, request):
    blocks = [block for block in EXAMPLES if block.page == page and block.marker is None]
    lay_out_workdir(tmp_path)
    if any(QUICKSTART_USE in block.code for block in blocks):
        shutil.copytree(request.getfixturevalue("quickstart_runs"), tmp_path / "runs")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    namespace: dict = {"__name__": "__docs_example__"}
    with one_cpu():
        for block in blocks:
            start = time.perf_counter()
            if block.lang == "bash":
                run_bash(block, tmp_path)
            else:
                run_python(block, namespace)
            print(f"{block.where}: {time.perf_counter() - start:.1f}s")


MARKED = [block for block in EXAMPLES if block.marker]


@pytest.mark.parametrize("block", MARKED, ids=[block.where for block in MARKED])
def test_a_marked_example_is_left_out(block):
    pytest.skip(f"{block.marker}: {block.reason}")


def test_every_example_is_found_and_every_marker_names_its_block():
    langs = {block.lang for block in ALL_BLOCKS}
    assert not langs & FORBIDDEN, f"write these blocks as ```bash or ```python: {sorted(langs & FORBIDDEN)}"
    assert sum(block.marker is None for block in EXAMPLES) >= 20 and len(RUN_PAGES) >= 5
    fences = {(block.page, block.line - 1) for block in ALL_BLOCKS}
    for page in PAGES:
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), start=1):
            if line.lstrip().startswith("<!-- example"):
                where = f"{page.relative_to(REPO_ROOT)}:{number}"
                assert MARKER.match(line), f"{where}: write <!-- example: slow|skip (reason) -->"
                assert (page, number) in fences, f"{where}: a marker goes on the line right before a fence"


def test_a_block_of_plain_tinylm_commands_runs_in_process_and_others_in_bash():
    assert tinylm_argv("tinylm train --model '{\"vocab_size\": 512}' --max-iters 5") == [
        "train", "--model", '{"vocab_size": 512}', "--max-iters", "5"]
    assert tinylm_argv('tinylm train-tokenizer --input "corpus/*.txt" --out t  # quoted; the CLI globs *') is not None
    for line in ("tinylm count-words --input shard-*.txt", "tinylm eval DIR > out.txt", "ls runs", "tinylm x | head",
                 "tinylm train --out-dir $OUT"):
        assert tinylm_argv(line) is None, line
    assert commands("tinylm a \\\n    --b 1   # note\n\n# comment\nls\n") == ["tinylm a      --b 1   # note", "ls"]
