"""`python -m tinylm_hf.evaluation.lm_eval_tasks OUT_DIR`: the same as `tinylm lm-eval-tasks OUT_DIR`."""

import sys

from ...cli import main

raise SystemExit(main(["lm-eval-tasks", *sys.argv[1:]]))
