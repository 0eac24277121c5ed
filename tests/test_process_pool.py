"""process_pool: the worker count a caller may ask for."""

from __future__ import annotations


import pytest

from tinylm_hf.tokenization.process_pool import WorkerDiedError, resolve_workers

@pytest.mark.parametrize("bad", [0, -1, True, 1.5, "2"])
def test_resolve_workers_rejects_non_positive_ints(bad) -> None:
    with pytest.raises(ValueError, match="num_workers"):
        resolve_workers(bad)


def test_resolve_workers_defaults_to_usable_cpus() -> None:
    assert resolve_workers(None) >= 1
    assert resolve_workers(3) == 3
