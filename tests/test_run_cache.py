"""The run cache's key: what a run computes, not where it writes."""
from __future__ import annotations

from harness.run_cache import run_key
from conftest import compose


def test_the_key_ignores_output_paths_and_progress_but_not_inputs():
    base = run_key(compose("seed=1"))
    assert run_key(compose("seed=1", "out_dir=/tmp/elsewhere", "cosim.progress=false", "cache.dir=/tmp/c")) == base
    assert run_key(compose("seed=2")) != base
    assert run_key(compose("seed=1", "system=xbar8")) != base
