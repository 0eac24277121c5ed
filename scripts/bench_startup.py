"""How long the `tinylm` command line takes to answer, beside a bare `python -c pass`, in fresh processes.

    python scripts/bench_startup.py [--runs 7]

Each row is the median wall time of `--runs` fresh processes (rows taken round-robin, so machine load hits
all alike), its ratio to `python -c pass`, and whether the process imported torch. The rows: `tinylm --help`,
`tinylm train --help`, flag errors (a mistyped flag; a training value `TrainConfig` refuses), and
`python -c "import tinylm_hf"`, and, for scale, `python -c "import torch"`. The command line runs as the
console script does (`tinylm_hf.cli.main`), with the interpreter running this script, on the tinylm_hf that
`python -c` imports from the current folder (run it from another checkout to time that one).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

# what each row runs after `python -c`; the probe prints whether torch was imported, to stderr's last line
PROBE = "import sys\n{body}\nprint('torch' in sys.modules, file=sys.stderr)"
CLI = "from tinylm_hf.cli import main\ntry:\n    main({argv!r})\nexcept SystemExit:\n    pass"
ROWS = {
    "python -c pass": "pass",
    "tinylm --help": CLI.format(argv=["--help"]),
    "tinylm train --help": CLI.format(argv=["train", "--help"]),
    "tinylm train --max-iterz 5 (unknown flag)": CLI.format(argv=["train", "--max-iterz", "5"]),
    "tinylm prepare --bogus (unknown flag)": CLI.format(argv=["prepare", "--bogus"]),
    "tinylm train-tokenizer --bogus (unknown flag)": CLI.format(argv=["train-tokenizer", "--bogus"]),
    "tinylm export-gguf --bogus (unknown flag)": CLI.format(argv=["export-gguf", "--bogus"]),
    "tinylm train --max-iters 5 (value refused)": CLI.format(argv=["train", "--max-iters", "5"]),
    'python -c "import tinylm_hf"': "import tinylm_hf",
    'python -c "import torch"': "import torch",
}


def time_once(body: str) -> tuple[float, bool]:
    """(seconds, torch imported) of one fresh process running `body`."""
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", PROBE.format(body=body)], capture_output=True, text=True)
    seconds = time.perf_counter() - start
    return seconds, done.stderr.strip().splitlines()[-1] == "True"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="fresh processes per row (default 7)")
    runs = parser.parse_args().runs
    times: dict[str, list[float]] = {name: [] for name in ROWS}
    torch_loaded: dict[str, bool] = {}
    for _ in range(runs):
        for name, body in ROWS.items():
            seconds, torch_loaded[name] = time_once(body)
            times[name].append(seconds)
    base = statistics.median(times["python -c pass"])
    print(f"| {'command':<46} | {'median s':>8} | {'x python -c pass':>16} | torch imported |")
    print(f"|{'-' * 48}|{'-' * 9}:|{'-' * 17}:|{'-' * 16}|")
    for name in ROWS:
        median = statistics.median(times[name])
        print(f"| {name:<46} | {median:>8.2f} | {median / base:>16.1f} | {'yes' if torch_loaded[name] else 'no':<14} |")


if __name__ == "__main__":
    main()
