"""The harness parsers under fuzzing, each with its seeds: command-line overrides (Hydra parser,
composition onto the schema, the checks before a run), BookSim config files and validate CSVs.

The override target (overrides_target.py) composes each distinct choice of config groups once
and applies the value overrides copy-on-write; `precheck` (the CLI's path, a full composition
per input) is a target of its own for the short run.
"""
from __future__ import annotations

import atexit
import os
import random
import shutil
import tempfile
from pathlib import Path

from harness import CONF_DIR, REPO_ROOT
from harness.fuzz import Target, mutate_text
from harness.fuzz.overrides_target import COMMAND_LINES, mutate_argv, run_overrides


def run_precheck(argv: list[str]) -> None:
    from harness.config.precheck import precheck

    precheck([a for a in argv if not a.startswith("out_dir")])  # never create folders


# ---------------------------------------------------------------- files

# Inputs go to memory-backed files where the system has them: a file write on a busy disk cost
# ~40 ms, more than the parsers themselves. The loaders still read a real file by its path.
_SHM = Path("/dev/shm")
_TMP = (_SHM if _SHM.is_dir() and os.access(_SHM, os.W_OK) else Path(tempfile.gettempdir())) / f"cais-fuzz-{os.getpid()}"


def _as_file(text: str, suffix: str) -> Path:
    """`text` as a file (latin-1: characters 128..255 become bytes that are not UTF-8)."""
    if not _TMP.is_dir():
        _TMP.mkdir()
        atexit.register(shutil.rmtree, _TMP, ignore_errors=True)  # /dev/shm is memory: leave nothing
    path = _TMP / f"input{suffix}"
    path.write_bytes(text.encode("latin-1", "replace"))
    return path


def run_booksim(text: str) -> None:
    from harness import booksim_config

    cfg = booksim_config.load(_as_file(text, ".cfg"))
    cfg.traffic()
    cfg.offered_flits()


BOOKSIM_SEEDS = [p.read_text() for p in sorted((CONF_DIR / "booksim").glob("*.cfg"))] + [
    "k = 8;\ntraffic = hotspot({{0,1}});\ninjection_rate = 0.2; // flits\n",
    "traffic = hotspot;\nhotspot_nodes = {2,3};\npacket_size = 4;\nvc_buf_size = 8;\ninjection_rate_uses_flits = 1;\n",
    "topology = fly; k = 4; n = 1; routing_function = dest_tag; num_vcs = 2; seed = 7; sim_type = latency;",
]


def _csv_loader(name: str):
    from harness.experiments import validate_collectives, validate_concurrent, validate_kernels, validate_overlap

    return {"collectives": validate_collectives.load_input, "concurrent": validate_concurrent.load_input,
            "kernels": validate_kernels.load_input, "overlap": validate_overlap.load_input}[name]


def run_validate_csv(value: tuple[str, str]) -> None:
    loader, text = value
    _csv_loader(loader)(str(_as_file(text, ".csv")))


def _csv_seeds() -> list[tuple[str, str]]:
    seeds = []
    files = sorted((REPO_ROOT / "harness/data/validation").glob("*.csv")) + [REPO_ROOT / "harness/data/measured/h100_kernels.csv"]
    for path in files:
        loader = next((k for k in ("collectives", "concurrent", "overlap", "kernels") if k in path.name), None)
        if loader:
            lines = path.read_text().splitlines()[:12]  # a few rows: mutations reach every column
            seeds.append((loader, "\n".join(lines) + "\n"))
    return seeds


def mutate_csv(seed: tuple[str, str], other: tuple[str, str], rng: random.Random) -> tuple[str, str]:
    return seed[0], mutate_text(seed[1], other[1], rng)


def all_targets() -> dict[str, Target]:
    return {
        "overrides": Target("overrides", COMMAND_LINES, run_overrides, mutate_argv),
        "precheck": Target("precheck", COMMAND_LINES, run_precheck, mutate_argv),
        "booksim": Target("booksim", BOOKSIM_SEEDS, run_booksim, mutate_text),
        "validate_csv": Target("validate_csv", _csv_seeds(), run_validate_csv, mutate_csv),
    }
