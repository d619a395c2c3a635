"""Experiments: one module each, ``run(cfg, out_dir) -> pandas.DataFrame``.

The CLI looks the module up by ``task`` (set by conf/experiment/<name>.yaml), so a new
experiment is one module here plus one YAML file, with no edits elsewhere.
"""
from __future__ import annotations

import importlib
import pkgutil
from typing import Callable

import pandas as pd

from harness.errors import ConfigError

Runner = Callable[..., pd.DataFrame]


def available() -> list[str]:
    return sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))


def get(name: str) -> Runner:
    if name not in available():
        raise ConfigError("task", f"unknown experiment '{name}' (available: {', '.join(available())})")
    module = importlib.import_module(f"{__name__}.{name}")
    return module.run
