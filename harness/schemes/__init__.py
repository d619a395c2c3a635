"""Schemes: how a tensor-parallel layer is lowered to kernels. One module per scheme registers
itself by name with a typed parameter dataclass and a lowering function
(graph + target -> kernels, streams, SM partitions, dependencies); conf/scheme/<name>.yaml only
sets values. Adding a scheme is one module here plus one YAML file, no edits elsewhere.
"""
from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass, fields
from typing import Any, Callable

from omegaconf import OmegaConf

from harness.errors import ConfigError


@dataclass
class SchemeParams:
    """Parameters every scheme has; a scheme's own dataclass extends this and says in check()
    which values it accepts."""
    name: str = "none"

    def check(self) -> None:
        """Raise ConfigError naming scheme.<key> for a value the lowering cannot use."""

    def require(self, key: str, ok: bool, allowed: str) -> None:
        if not ok:
            raise ConfigError(f"scheme.{key}", f"{getattr(self, key)!r} is not allowed for scheme '{self.name}' "
                              f"({allowed})")


@dataclass(frozen=True)
class SchemeSpec:
    name: str
    partition: str                      # tp | sp: how the layer's activations are partitioned
    params: type                        # a SchemeParams subclass
    lower: Callable[..., Any]           # lower(graph, target, params) -> harness.schemes.lowering.Lowered
    summary: str = ""


_REGISTRY: dict[str, SchemeSpec] = {}
_HELPERS = {"lowering", "overlap", "cais_dataflow"}  # modules of this package that are not schemes


def register(name: str, *, partition: str, params: type = SchemeParams, summary: str = ""):
    """Decorator for a scheme's lowering function."""
    def wrap(fn):
        if name in _REGISTRY:
            raise RuntimeError(f"scheme '{name}' registered twice")
        _REGISTRY[name] = SchemeSpec(name, partition, params, fn, summary)
        return fn
    return wrap


def _load_all() -> None:
    for m in pkgutil.iter_modules(__path__):
        if not m.name.startswith("_") and m.name not in _HELPERS:
            importlib.import_module(f"{__name__}.{m.name}")


def available() -> list[str]:
    _load_all()
    return sorted(_REGISTRY)


def get(name: str) -> SchemeSpec:
    _load_all()
    if name not in _REGISTRY:
        raise ConfigError("scheme", f"unknown scheme '{name}' (choices: {', '.join(sorted(_REGISTRY))})")
    return _REGISTRY[name]


def params_from_config(spec: SchemeSpec, scheme_cfg) -> Any:
    """cfg.scheme checked against the scheme's dataclass: an unknown key or a wrong type is a
    one-line error naming scheme.<key>."""
    values = OmegaConf.to_container(scheme_cfg, resolve=True) if not isinstance(scheme_cfg, dict) else dict(scheme_cfg)
    known = {f.name for f in fields(spec.params)}
    for key in values:
        if key not in known:
            raise ConfigError(f"scheme.{key}", f"not a parameter of scheme '{spec.name}' "
                              f"(parameters: {', '.join(sorted(known))})")
    try:
        merged = OmegaConf.merge(OmegaConf.structured(spec.params), values)
    except Exception as exc:  # OmegaConf's validation errors carry the key
        key = getattr(exc, "full_key", None)
        raise ConfigError(f"scheme.{key}" if key else "scheme", str(exc).splitlines()[0]) from None
    params = OmegaConf.to_object(merged)
    params.check()
    return params
