"""The run cache: a finished run's outputs, keyed by the hash of what determines them.

A run is a pure function of its resolved config, the harness code, the engine binaries and the
input files its config names; the key hashes exactly those. Left out: where the run writes
(``out_dir``), how it shows progress (``cosim.progress``, ``cosim.watch``) and the cache's own
keys; wall-clock figures are outputs (timing.csv), never inputs. So a repeated or interrupted
sweep finds every point it already finished and recomputes nothing, while a code change or an
edited input file misses the cache as it must.

Layout: ``<cache dir>/<key[:2]>/<key>/`` holds the run folder's files (results.csv and all that
came with it: stats.csv, series.csv, kernels.csv, timing.csv of the run that computed it);
an entry is written to a temporary folder and renamed into place, so a crash never leaves a
half entry that looks finished.
"""
from __future__ import annotations

import hashlib
import os
import secrets
import shutil
from functools import lru_cache
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from harness import REPO_ROOT
from harness.engines import engine_dir

# How a run's engines are spread over processes and talk: results are partition invariant
# (tests/test_cosim.py, test_schemes.py), so a run cached one way serves every other.
PARTITION_KEYS = ("cosim.colocate", "cosim.processes", "cosim.gpus_per_process", "cosim.switches_per_process", "cosim.transport",
                  "cosim.tcp_host", "cosim.launcher", "cosim.shm_spin_us")
# Keys that change where or how a run reports, or how its engines are spread, never what it computes.
# `figure` and `paper` only orchestrate: which experiment a point belongs to (a point's task is
# `task` itself), so a point two figures share (Table II's half-scale layers are Fig 11's and Fig
# 17's, Fig 15's sub-layers Fig 12's) runs once.
EXCLUDED_KEYS = ("out_dir", "cosim.progress", "cosim.watch", "cache", "figure", "paper", *PARTITION_KEYS)
# Written by the run path itself, not by the experiment: never cached.
NOT_CACHED = ("status.json",)
ENV_DIR = "CAIS_CACHE_DIR"
# Harness code that only orchestrates runs or reads their outputs (sweeps, figures, reports, tools):
# a run's results cannot depend on it, so editing a plot does not throw away every cached run.
NOT_RUN_CODE = ("figures", "report.py", "diff.py", "sweep.py", "bench.py", "bench_layer.py", "container",
                "fuzz", "experiments/figure.py", "experiments/paper.py", "config/describe.py", "data/paper",
                "data/results", "data/measured/raw", "data/calibration/h100_validation.csv")
# data/results, the validations' result tables and the measurements' raw logs are outputs that
# are committed (past runs' rows, what a device printed) and read by no run: committing a re-run's
# rows must not throw away the cached runs.
OUTPUT_GLOBS = ("data/validation/*_results*.csv",)


def cache_dir(cfg: DictConfig) -> Path:
    """cache.dir, else $CAIS_CACHE_DIR, else $XDG_CACHE_HOME/cais-sim (~/.cache/cais-sim)."""
    if cfg.cache.dir:
        return Path(str(cfg.cache.dir)).expanduser()
    if os.environ.get(ENV_DIR):
        return Path(os.environ[ENV_DIR]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "cais-sim"


def _drop(tree: dict, dotted: str) -> None:
    *parents, leaf = dotted.split(".")
    for p in parents:
        tree = tree.get(p)
        if not isinstance(tree, dict):
            return
    tree.pop(leaf, None)


# Generated from proto/*.proto on first use (harness/protocol.py): whether they exist yet, and
# their bytes under another protoc, say nothing about what a run computes; the .proto sources do.
GENERATED = ("_proto",)


def fingerprint_files() -> list[Path]:
    """The files code_fingerprint hashes: the harness's Python sources and data that a run executes
    or reads (all but NOT_RUN_CODE and GENERATED), the protocol's .proto sources and the built
    engines."""
    root = REPO_ROOT / "harness"
    skip = tuple(root / s for s in (*NOT_RUN_CODE, *GENERATED))
    files = sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts
                   and not any(p == s or s in p.parents for s in skip)
                   and not any(p.relative_to(root).match(g) for g in OUTPUT_GLOBS))
    files += sorted((REPO_ROOT / "proto").glob("*.proto"))
    engines = engine_dir()
    if engines.is_dir():
        files += sorted(p for p in engines.iterdir() if p.is_file() and (p.name.startswith("cais-engine")
                                                                          or p.suffix == ".so"))
    return files


@lru_cache(maxsize=None)
def code_fingerprint() -> str:
    """Hash of fingerprint_files(), each by its path and bytes."""
    h = hashlib.sha256()
    for p in fingerprint_files():
        h.update(str(p.relative_to(REPO_ROOT) if p.is_relative_to(REPO_ROOT) else p.name).encode())
        h.update(p.read_bytes())
    return h.hexdigest()


def _input_files(tree, found: list[Path]) -> None:
    """Every string value of the config that names an existing file (validate.input, a BookSim
    config): its contents are inputs as much as the keys are."""
    if isinstance(tree, dict):
        for v in tree.values():
            _input_files(v, found)
    elif isinstance(tree, list):
        for v in tree:
            _input_files(v, found)
    elif isinstance(tree, str) and ("/" in tree or tree.endswith((".csv", ".cfg", ".json"))):
        p = Path(tree) if Path(tree).is_absolute() else REPO_ROOT / tree
        if p.is_file():
            found.append(p)


def run_key(cfg: DictConfig) -> str:
    """The hash of everything a run's results depend on (module docstring)."""
    tree = OmegaConf.to_container(cfg, resolve=True)
    for key in EXCLUDED_KEYS:
        _drop(tree, key)
    h = hashlib.sha256()
    h.update(OmegaConf.to_yaml(OmegaConf.create(tree), sort_keys=True).encode())
    h.update(code_fingerprint().encode())
    files: list[Path] = []
    _input_files(tree, files)
    for p in sorted(set(files)):
        h.update(p.read_bytes())
    return h.hexdigest()[:32]


def entry(cfg: DictConfig, key: str) -> Path:
    return cache_dir(cfg) / key[:2] / key


def lookup(cfg: DictConfig, key: str, out_dir: Path) -> bool:
    """Copy a cached run's outputs into out_dir; False when there is none (or caching is off)."""
    if not cfg.cache.enabled:
        return False
    src = entry(cfg, key)
    if not (src / "results.csv").is_file():
        return False
    # copyfile, not copy2: the files get this process's umask, as the run's own files would
    shutil.copytree(src, out_dir, dirs_exist_ok=True, ignore=shutil.ignore_patterns("results.csv"),
                    copy_function=shutil.copyfile)
    shutil.copyfile(src / "results.csv", out_dir / "results.csv")  # last: marks the folder finished
    return True


def store(cfg: DictConfig, key: str, out_dir: Path) -> str:
    """Keep a finished run's outputs under its key. A cache that cannot be written (read-only,
    full) costs a recomputation later, never the run: returns why it was not stored ("" when it
    was, or caching is off), for the run's status and the sweep's summary to say."""
    if not cfg.cache.enabled:
        return ""
    dst = entry(cfg, key)
    if (dst / "results.csv").is_file():
        return ""
    tmp = dst.parent / f".{key}.{os.getpid()}.{secrets.token_hex(3)}.tmp"
    try:
        tmp.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(out_dir, tmp, ignore=shutil.ignore_patterns(*NOT_CACHED, ".*.tmp"))
        os.rename(tmp, dst)
    except OSError as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        if (dst / "results.csv").is_file():
            return ""  # another process stored it first
        return f"cannot write {cache_dir(cfg)}: {exc.strerror or exc}"
    return ""
