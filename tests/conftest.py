"""Shared fixtures: the built engines and a helper to run cais-sim as users do."""
from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd
import pytest

from harness import CONF_DIR, REPO_ROOT
from harness.engines import engine_dir

CAIS_SIM = [sys.executable, "-m", "harness.cli"]
# The run cache of the test session: never the user's, and empty at the start.
os.environ["CAIS_CACHE_DIR"] = tempfile.mkdtemp(prefix="cais-test-cache-")
atexit.register(shutil.rmtree, os.environ["CAIS_CACHE_DIR"], True)  # removed by its creator only


@pytest.fixture(scope="session")
def engines() -> Path:
    d = engine_dir()
    if not (d / "cais-engine").exists():
        pytest.fail(f"engines not built in {d}: run scripts/build_engines.sh (scripts/setup.sh does)")
    return d


def run_cli(*overrides: str, timeout: float = 300, check: bool = True, env: dict | None = None):
    # How engines are spread over processes is not in a run's cache key (results are partition
    # invariant), so a run that differs from an earlier one only there would be a cache hit; the
    # tests that compare partitions must simulate it.
    from harness.run_cache import PARTITION_KEYS

    keys = [o.split("=", 1)[0].lstrip("+~") for o in overrides]
    if any(k in PARTITION_KEYS for k in keys) and not any(k.startswith("cache.") for k in keys):
        overrides = (*overrides, "cache.enabled=false")
    proc = subprocess.run([*CAIS_SIM, *overrides], cwd=REPO_ROOT, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})})
    if check and proc.returncode != 0:
        raise AssertionError(f"cais-sim {' '.join(overrides)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return proc


@pytest.fixture
def cli():
    return run_cli


def compose(*overrides: str):
    from hydra import compose as hydra_compose, initialize_config_dir

    from harness.config.schema import register

    register()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return hydra_compose(config_name="config", overrides=list(overrides))


def read_results(out_dir: Path) -> pd.DataFrame:
    return pd.read_csv(out_dir / "results.csv")
