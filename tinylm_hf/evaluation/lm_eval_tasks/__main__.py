"""`python -m tinylm_hf.evaluation.lm_eval_tasks OUT_DIR`: write the lm-eval task YAMLs."""

from . import main

raise SystemExit(main())
