"""Where a run writes: ``out_dir`` when given, else a folder no other run can share.

Hydra's stock ``outputs/DATE/TIME`` is the same for two runs started in the same second, so one
run's results replaced the other's. conf/config.yaml sets ``hydra.run.dir`` and
``hydra.sweep.dir`` through the ``cais_run_dir`` resolver, which returns ``out_dir`` as given, or
``<base>/DATE/TIME-PID-RANDOM`` (PID: unique on this host at this moment; RANDOM: across hosts
writing to one shared file system). The suffix is drawn once per process, so every look-up of
the run folder within one run agrees.
"""
from __future__ import annotations

import os
import secrets
import shutil
import time
from pathlib import Path

from omegaconf import OmegaConf

RESOLVER = "cais_run_dir"
_RUN_ID: str | None = None


def run_id() -> str:
    """DATE/TIME-PID-RANDOM of this process, drawn on first use."""
    global _RUN_ID
    if _RUN_ID is None:
        _RUN_ID = time.strftime("%Y-%m-%d/%H-%M-%S") + f"-{os.getpid()}-{secrets.token_hex(2)}"
    return _RUN_ID


def run_dir(out_dir, base: str) -> str:
    """out_dir if set, else <base>/<run_id()> (relative to the working directory, as Hydra's)."""
    return str(out_dir) if out_dir not in (None, "") else f"{base}/{run_id()}"


def register_resolver() -> None:
    if not OmegaConf.has_resolver(RESOLVER):
        OmegaConf.register_new_resolver(RESOLVER, run_dir)


def discard_run_dir(path: Path) -> None:
    """Remove the folder a failed run was given when the run chose it itself (no out_dir), and
    its parents as far as they are empty, so that failed runs leave no folders behind. Nothing
    happens unless path ends with this process's run id, i.e. was made for this run."""
    path = Path(path)
    if not path.as_posix().endswith(run_id()):
        return
    shutil.rmtree(path, ignore_errors=True)
    for parent in path.parents[:2]:  # DATE/, then outputs/ (or multirun/)
        try:
            parent.rmdir()
        except OSError:
            break
