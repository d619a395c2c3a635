"""Engine parameters, each declared once as a typed dataclass field (with its unit in its name).

Every module in this package declares ``GROUPS = {"prefix": Dataclass, ...}``. The root Hydra
schema (harness.config.schema) mounts each dataclass at its prefix (``net``, ``net.cais_merge``,
``gpu``...), YAML under conf/ sets values, and :func:`flatten` turns the resolved groups into
the dotted keys that travel to the engines in ``Configure.params``. Engines keep no defaults.
"""
from __future__ import annotations

import dataclasses
import importlib
import pkgutil
from typing import Any

from omegaconf import DictConfig, ListConfig, OmegaConf


def discover() -> dict[str, type]:
    """prefix -> dataclass for every parameter group declared in harness/params/*.py."""
    groups: dict[str, type] = {}
    for info in pkgutil.iter_modules(__path__):
        module = importlib.import_module(f"{__name__}.{info.name}")
        for prefix, cls in getattr(module, "GROUPS", {}).items():
            if prefix in groups and groups[prefix] is not cls:
                raise RuntimeError(f"parameter group '{prefix}' declared twice")
            groups[prefix] = cls
    return dict(sorted(groups.items()))


def _scalar(value: Any) -> Any:
    if isinstance(value, (ListConfig, DictConfig)):
        return OmegaConf.to_container(value, resolve=True)
    return value


def flatten(cfg: DictConfig, groups: dict[str, type]) -> dict[str, Any]:
    """Dotted key -> value for every field of every group (nested groups excluded from parents)."""
    out: dict[str, Any] = {}
    for prefix, cls in groups.items():
        node = OmegaConf.select(cfg, prefix)
        if node is None:
            continue
        for f in dataclasses.fields(cls):
            if f"{prefix}.{f.name}" in groups:  # a nested group: flattened under its own prefix
                continue
            out[f"{prefix}.{f.name}"] = _scalar(node[f.name])
    return out
