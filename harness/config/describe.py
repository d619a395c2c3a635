"""cais-sim describe [GROUP|KEY ...] [overrides...]: every parameter's type, value, unit and documentation.

One source of truth: the documentation is the docstring written under each dataclass field
(harness/params/*.py, harness/config/schema.py), read from the source with ``ast``; a field made
without source (the root keys) may carry it in ``field(metadata={"doc": ...})``. The unit comes
from the name's suffix, the project's convention (``latency_ns``, ``lane_bw_gbps``). The value
shown is the one a run with the given overrides gets (conf/ and the command line applied).
"""
from __future__ import annotations

import ast
import dataclasses
import functools
import inspect
import textwrap
from dataclasses import dataclass
from typing import Any

from harness import CONF_DIR
from harness.errors import ConfigError

UNITS = {  # name suffix -> unit
    "_ps": "ps", "_ns": "ns", "_us": "us", "_s": "s", "_mhz": "MHz", "_gbps": "GB/s", "_bytes": "B",
    "_kb": "KB", "_mb": "MB", "_flits": "flits", "_cycles": "cycles", "_cycle": "per cycle", "_pct": "%",
    "_entries": "entries", "_sms": "SMs", "_per_sm": "per SM",
}


@dataclass
class Param:
    key: str
    type: str
    default: Any
    unit: str
    doc: str


@functools.lru_cache(maxsize=None)
def field_docs(cls: type) -> dict[str, str]:
    """{field: docstring} for the fields a class declares in its own source (the string literal
    right after an annotated assignment)."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    except (OSError, TypeError):  # made by make_dataclass: no source
        return {}
    body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
    docs = {}
    for stmt, nxt in zip(body, body[1:]):
        if (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and isinstance(nxt, ast.Expr)
                and isinstance(nxt.value, ast.Constant) and isinstance(nxt.value.value, str)):
            docs[stmt.target.id] = " ".join(inspect.cleandoc(nxt.value.value).split())
    return docs


def doc_of(cls: type, f: dataclasses.Field) -> str:
    if f.metadata.get("doc"):
        return f.metadata["doc"]
    for klass in cls.__mro__:  # the class that declares the field holds its docstring
        if f.name in getattr(klass, "__annotations__", {}):
            doc = field_docs(klass).get(f.name)
            if doc:
                return doc
    return ""


def unit_of(name: str) -> str:
    for suffix in sorted(UNITS, key=len, reverse=True):
        if name.endswith(suffix):
            return UNITS[suffix]
    return ""


def _nested(f: dataclasses.Field) -> type | None:
    if f.default_factory is dataclasses.MISSING:
        return None
    value = f.default_factory()
    return type(value) if dataclasses.is_dataclass(value) else None


def params(cls: type, values, prefix: str = "") -> list[Param]:
    """Every leaf key under cls, in declaration order, with its value from `values` (a DictConfig)."""
    out = []
    for f in dataclasses.fields(cls):
        sub = _nested(f)
        if sub is not None:
            out.extend(params(sub, values[f.name] if values is not None else None, f"{prefix}{f.name}."))
            continue
        type_name = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", str(f.type))
        value = values[f.name] if values is not None else None
        out.append(Param(prefix + f.name, str(type_name).replace("typing.", ""), value, unit_of(f.name),
                         doc_of(cls, f)))
    return out


def groups(cls: type) -> dict[str, type]:
    return {f.name: _nested(f) for f in dataclasses.fields(cls) if _nested(f) is not None}


def _fmt_value(v) -> str:
    from omegaconf import OmegaConf

    if hasattr(v, "_metadata"):  # a ListConfig / DictConfig
        v = OmegaConf.to_container(v)
    return "null" if v is None else repr(v) if isinstance(v, str) else str(v)


def render(items: list[Param]) -> str:
    lines = []
    for p in items:
        unit = f" [{p.unit}]" if p.unit else ""
        lines.append(f"{p.key}: {p.type} = {_fmt_value(p.default)}{unit}")
        if p.doc:
            lines.extend("    " + l for l in textwrap.wrap(p.doc, 92))
    return "\n".join(lines)


def config_groups() -> dict[str, list[str]]:
    """conf/<group>/*.yaml: the choices of every config group (system=, experiment=, ...)."""
    return {d.name: sorted(p.stem for p in d.glob("*.yaml"))
            for d in sorted(CONF_DIR.iterdir()) if d.is_dir() and any(d.glob("*.yaml"))}


def overview(root: type) -> str:
    lines = ["Parameter groups (cais-sim describe GROUP):"]
    for name, cls in groups(root).items():
        # a group made by make_dataclass documents itself by its signature: its base holds the doc
        documented = next((k for k in cls.__mro__ if k.__doc__ and not k.__doc__.startswith(k.__name__ + "(")), None)
        first = (inspect.getdoc(documented) or "").splitlines() if documented not in (None, object) else []
        n = len(params(cls, None))
        summary = first[0] if first else ""
        lines.append(f"  {name:<12} {n:>3} keys  {summary}")
    top = [f.name for f in dataclasses.fields(root) if _nested(f) is None]
    lines.append("Top-level keys: " + ", ".join(top) + " (cais-sim describe KEY)")
    lines.append("Config groups (GROUP=CHOICE):")
    lines.extend(f"  {g}={'|'.join(c)}" for g, c in config_groups().items())
    return "\n".join(lines)


def usage() -> str:
    return "\n".join([
        "usage: cais-sim [KEY=VALUE ...] [GROUP=CHOICE ...]         one run (results in out_dir, or outputs/...)",
        "       cais-sim -m KEY=V1,V2 ...                           a sweep: one run per point, out_dir/N",
        "       cais-sim describe [GROUP|KEY ...] [KEY=VALUE ...]   parameters: type, value, unit, documentation",
        "       cais-sim --cfg job [KEY=VALUE ...]                  the resolved config of a run, as YAML",
        "       cais-sim --hydra-help                               Hydra's own options",
        "",
        overview(_root()),
    ])


def _root() -> type:
    from harness.config.schema import build_root

    return build_root()


def main(argv: list[str]) -> int:
    """Print the description of the groups or keys in argv (none: the overview) with the
    KEY=VALUE overrides among them applied to the values."""
    targets = [a for a in argv if "=" not in a]
    overrides = [a for a in argv if "=" in a]
    from harness.config.precheck import compose_one

    cfg = compose_one(overrides)
    root = _root()
    if not targets:
        print(overview(root))
        return 0
    known = params(root, cfg)
    items = []
    for target in targets:
        hits = [p for p in known if p.key == target or p.key.startswith(target + ".")]
        if not hits:
            names = ", ".join(groups(root))
            raise ConfigError("describe", f"no parameter group or key '{target}'; groups: {names}")
        items += [p for p in hits if p not in items]
    print(render(items))
    return 0
