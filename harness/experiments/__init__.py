"""Experiments: one module each, ``run(cfg, out_dir) -> pandas.DataFrame``.

The CLI looks the module up by ``task`` (set by conf/experiment/<name>.yaml), so a new
experiment is one module here plus one YAML file, with no edits elsewhere. A module may name the
columns the CLI prints (``DISPLAY``); results.csv always has them all; and the config keys it
never reads (``IGNORED_KEYS``: a key, or a section with everything under it; or, where that
depends on the run, a function ``ignored_keys(cfg)``), which the CLI then refuses on the command
line instead of running without them.
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


def _module(name: str):
    if name not in available():
        raise ConfigError("task", f"unknown experiment '{name}' (available: {', '.join(available())})")
    return importlib.import_module(f"{__name__}.{name}")


def get(name: str) -> Runner:
    return _module(name).run


def ignored_keys(name: str, cfg=None) -> list[tuple[tuple[str, ...], str]]:
    """Groups of keys (or sections) experiment `name` never reads in the run `cfg`, each with the
    case in which it does not ('' when never): its module's ignored_keys(cfg) -> (keys, case), or
    a list of such groups, where it has one, else its IGNORED_KEYS."""
    m = _module(name)
    if cfg is not None and hasattr(m, "ignored_keys"):
        groups = m.ignored_keys(cfg)
        groups = [groups] if isinstance(groups, tuple) else groups
        return [(tuple(keys), case) for keys, case in groups]
    return [(tuple(getattr(m, "IGNORED_KEYS", ())), "")]


def display_columns(name: str) -> list[str] | None:
    """The columns the CLI prints of an experiment's results (its module's DISPLAY; None: all)."""
    return getattr(_module(name), "DISPLAY", None)
