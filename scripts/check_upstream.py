"""Run the contract tests on the newest transformers / tokenizers / datasets / huggingface_hub, past our caps.

A maintainer's drift check: builds a throwaway virtualenv that sees this environment's packages (torch,
tinylm_hf itself, the test tools) through a .pth file, installs the newest releases pip can find of the
fast-moving dependencies into it (ignoring pyproject.toml's caps, and leaving this environment as it
is), runs the tests marked `contract` there, and prints which pass and fail. When everything passes,
raise the caps in pyproject.toml and in tinylm_hf/compat.py; when something fails, compat.py is where the new release's branch goes.

    python scripts/check_upstream.py                      # newest of all four
    python scripts/check_upstream.py transformers==5.25.0 # a chosen release (others stay as installed)

Exit code 0 when every contract test passes, 1 when one fails, 2 when the environment could not be built.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import sysconfig
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
UPSTREAM = ("transformers", "tokenizers", "datasets", "huggingface_hub")


def build_env(root: Path, requirements: list[str]) -> Path:
    """A venv at root that reads this environment's site-packages after its own; returns its python."""
    subprocess.run([sys.executable, "-m", "venv", str(root)], check=True)
    python = root / "bin" / "python"
    purelib = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True,
    ).stdout.strip()
    # addsitedir also runs this environment's .pth files (an editable tinylm_hf install is one)
    parent = sysconfig.get_paths()["purelib"]
    (Path(purelib) / "_tinylm_parent_env.pth").write_text(f"import site; site.addsitedir({parent!r})\n")
    pip = [python, "-m", "pip", "install", "--quiet", "--upgrade", *requirements]
    subprocess.run(pip, check=True)
    return python


def installed_versions(python: Path) -> dict[str, str]:
    code = "import importlib.metadata as m, json, sys; print(json.dumps({p: m.version(p) for p in sys.argv[1:]}))"
    out = subprocess.run([python, "-c", code, *UPSTREAM], check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def run_contract_tests(python: Path, report: Path) -> subprocess.CompletedProcess:
    argv = [python, "-m", "pytest", "-q", "-m", "contract and not slow", f"--junitxml={report}", "-p", "no:cacheprovider"]
    return subprocess.run(argv, cwd=REPO_ROOT, capture_output=True, text=True)


def summarise(report: Path) -> tuple[dict[str, list[int]], list[str]]:
    """Per test file [passed, failed, skipped], and the ids of the failed tests."""
    per_file: dict[str, list[int]] = {}
    failed: list[str] = []
    for case in ET.parse(report).getroot().iter("testcase"):
        name = case.get("classname", "").rsplit(".", 1)[-1] + ".py"
        counts = per_file.setdefault(name, [0, 0, 0])
        if case.find("failure") is not None or case.find("error") is not None:
            counts[1] += 1
            failed.append(f"{name}::{case.get('name')}")
        elif case.find("skipped") is not None:
            counts[2] += 1
        else:
            counts[0] += 1
    return per_file, failed


def print_table(versions: dict[str, str], per_file: dict[str, list[int]], failed: list[str], seconds: float) -> None:
    print("upstream under test: " + ", ".join(f"{k} {v}" for k, v in versions.items()))
    width = max(map(len, per_file), default=10)
    print(f"{'test file':<{width}}  passed  failed  skipped")
    for name, (passed, fails, skipped) in sorted(per_file.items()):
        print(f"{name:<{width}}  {passed:>6}  {fails:>6}  {skipped:>7}")
    totals = [sum(c[i] for c in per_file.values()) for i in range(3)]
    print(f"{'total':<{width}}  {totals[0]:>6}  {totals[1]:>6}  {totals[2]:>7}   ({seconds:.0f} s)")
    for test_id in failed:
        print(f"FAILED {test_id}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("requirements", nargs="*", help=f"what to install (default: the newest {', '.join(UPSTREAM)})")
    parser.add_argument("--keep", type=Path, help="build the virtualenv here and keep it (default: a temporary one)")
    args = parser.parse_args(argv)
    requirements = args.requirements or list(UPSTREAM)
    with tempfile.TemporaryDirectory(prefix="tinylm-upstream-") as scratch:
        root = args.keep or Path(scratch) / "venv"
        try:
            python = build_env(root, requirements)
        except subprocess.CalledProcessError as error:
            print(f"error: could not build the upstream environment ({error}); is the package index reachable?", file=sys.stderr)
            return 2
        versions = installed_versions(python)
        start = time.perf_counter()
        result = run_contract_tests(python, Path(scratch) / "report.xml")
        if not (Path(scratch) / "report.xml").is_file():
            print(result.stdout[-3000:] + result.stderr[-3000:], file=sys.stderr)
            return 2
        per_file, failed = summarise(Path(scratch) / "report.xml")
        print_table(versions, per_file, failed, time.perf_counter() - start)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
