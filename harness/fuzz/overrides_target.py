"""The `overrides` fuzz target: a command line through what the CLI does with it before a run.

Hydra's override parser (and `-m` sweep expansion), composition of the config groups, the value
overrides applied with Hydra's own code, interpolation, `cosim.progress` and the default
experiment's checks with `topology.build`.

What makes an input cheap (~1 ms instead of ~20 ms) without checking less:
- each distinct choice of config groups is composed once (cached);
- the value overrides go onto the cached config copy-on-write: only the top-level sections they
  name are copied (the cached sections are read-only, so an override that reaches one it did not
  name fails loudly and the input is redone on a full copy, `run_overrides_full`);
- interpolation is resolved where its result can differ from the cached config's (resolved
  once when cached): the copied sections and every section holding an interpolation;
- parsed overrides are cached by their text (the parser is a pure function of the string).
Composing a new choice of groups costs ~100 ms, and mutated option names are new every time: once
Hydra has refused a missing option of a group and listed the group's options, a command line
picking an option outside that list is composed on every `MISSING_OPTION_SAMPLE`-th such input
only (the others get that earlier refusal).
"""
from __future__ import annotations

import copy
import functools
import io
import pickle
import random
import re
from contextlib import contextmanager

from harness import CONF_DIR
from harness.errors import ConfigError
from harness.fuzz import mutate_text

COMMAND_LINES = [  # seeds: what the README and the tests run
    [],
    ["system=xbar8", "seed=3"],
    ["model=tiny", "system=dgx_h100_half", "phase=training", "workload=sublayer_l3", "scheme=coconet_nvls"],
    ["-m", "seed=1,2,3", "cosim.gpus_per_process=1,8"],
    ["experiment=validate_kernels"],
    ["experiment=validate_collectives", "calibration=nccl228_h200"],
    ["experiment=net_synthetic", "net.booksim_config=conf/booksim/fly8_uniform.cfg"],
    ["system.gpu_model=collective", "cosim.progress=false", "traffic.request_bytes=64"],
    ["-m", "seed=range(1,4)", "traffic.requests_per_gpu=choice(1,2)"],
    ["+foo=1", "~seed", "++cosim.watch=[gpu0,sw1]", "system.gpus=4"],
]
GROUPS = {p.name for p in CONF_DIR.iterdir() if p.is_dir() and any(p.glob("*.yaml"))}
MISSING_OPTION_SAMPLE = 16
_stats = {"compositions": 0, "full_copies": 0, "sampled_out": 0}  # printed by scripts/fuzz_parsers.py
_group_options: dict[str, tuple[frozenset, ConfigError]] = {}  # group -> the options Hydra listed, a refusal
_missing_seen = [0]


def stats_line() -> str:
    """How the inputs so far were checked: compositions made, points redone on a full copy,
    inputs given an earlier refusal of a missing group option (sampled out)."""
    return (f"overrides: {_stats['compositions']} compositions, {_stats['full_copies']} points on a full copy, "
            f"{_stats['sampled_out']} refusals of a missing group option taken from an earlier composition")


def _one_line(exc: BaseException) -> ConfigError:
    from harness.config.precheck import one_line

    return ConfigError("", one_line(exc))


class _Base:
    """A composed config, its top-level sections read-only, and which sections hold interpolations."""

    def __init__(self, cfg):
        from omegaconf import OmegaConf

        self.cfg = cfg
        content = cfg.__dict__["_content"]
        self.keys = set(content)
        self.interpolated = {k for k, node in content.items() if _has_interpolation(node)}
        self.pickled = {k: _pickled(node) for k, node in content.items()}  # writable, no parent
        for node in content.values():
            node._set_flag("readonly", True)
        OmegaConf.to_container(cfg, resolve=True)  # as compose_all: the cached config resolves

    def section_copy(self, key: str):
        """A writable copy of one top-level section, its parent the cached config (unpickling is
        ~6x faster than copy.deepcopy, which copies every node's metadata dataclass the slow way)."""
        section = _Unpickler(io.BytesIO(self.pickled[key])).load()
        section._set_parent(self.cfg)
        return section


_SCHEMA_TYPES: dict[int, type] = {}  # the schema's dataclasses are made at run time: pickled by reference


class _Pickler(pickle.Pickler):
    def persistent_id(self, obj):
        if isinstance(obj, type) and obj.__module__ == "types":
            _SCHEMA_TYPES[id(obj)] = obj
            return id(obj)
        return None


class _Unpickler(pickle.Unpickler):
    def persistent_load(self, pid):
        return _SCHEMA_TYPES[pid]


def _pickled(node) -> bytes:
    parent = node.__dict__["_parent"]
    node.__dict__["_parent"] = None  # the section alone
    try:
        out = io.BytesIO()
        _Pickler(out, protocol=pickle.HIGHEST_PROTOCOL).dump(node)
        return out.getvalue()
    finally:
        node.__dict__["_parent"] = parent


def _has_interpolation(node) -> bool:
    if node._is_interpolation():
        return True
    content = node.__dict__.get("_content")
    children = content.values() if isinstance(content, dict) else content if isinstance(content, list) else ()
    return any(_has_interpolation(child) for child in children)


@functools.lru_cache(maxsize=256)  # a few hundred choices cover nearly every input; one is ~0.6 MB
def _composed(groups: tuple[str, ...]):
    """The config composed with these group overrides (a _Base), or the ConfigError composing gives."""
    from harness.config.precheck import compose_one

    _stats["compositions"] += 1
    try:
        return _Base(compose_one(list(groups)))
    except ConfigError as exc:
        missing = re.fullmatch(r"(.+)/[^/]*: no such config; available: (.*)", str(exc))
        if missing:
            _group_options[missing.group(1)] = (frozenset(missing.group(2).split(", ")), exc)
        return exc


def _sampled_refusal(overrides) -> ConfigError | None:
    """Hydra's earlier refusal for a group when an override picks an option outside the options
    Hydra listed for it, except on every MISSING_OPTION_SAMPLE-th such input (composed again, so
    Hydra's own answer is checked)."""
    from hydra.core.override_parser.types import OverrideType

    known = None
    named = [o.key_or_group for o in overrides]
    for o in overrides:  # a group named twice takes its last option (Hydra accepts x=bad x=good)
        if o.type is OverrideType.CHANGE and o.package is None and o.key_or_group in _group_options \
                and named.count(o.key_or_group) == 1:
            options, refusal = _group_options[o.key_or_group]
            if isinstance(o.value(), str) and o.value() not in options:
                known = refusal
                break
    if known is None:
        return None
    _missing_seen[0] += 1
    if _missing_seen[0] % MISSING_OPTION_SAMPLE == 0:
        return None
    _stats["sampled_out"] += 1
    return known


@functools.lru_cache(maxsize=65536)
def _parsed(override: str):
    """Hydra's parse of one override, or the ConfigError it gives (parse_overrides parses each
    string on its own, so a list is the concatenation of these)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    try:
        return OverridesParser.create().parse_overrides([override])[0]
    except Exception as exc:  # noqa: BLE001 - Hydra's parser errors are user errors (as precheck)
        return _one_line(exc)


def _parse(point: list[str]) -> list:
    out = []
    for text in point:
        parsed = _parsed(text)
        if isinstance(parsed, ConfigError):
            raise parsed
        out.append(parsed)
    return out


@contextmanager
def _copy_on_write(base: _Base, sections: set[str]):
    """base.cfg with `sections` replaced by writable copies; the cached sections come back after."""
    content = base.cfg.__dict__["_content"]
    saved = dict(content)
    try:
        for key in sections & saved.keys():
            content[key] = base.section_copy(key)
        yield base.cfg
    finally:
        content.clear()
        content.update(saved)  # same order, the cached nodes
        base.cfg._invalidate_flags_cache()


def _reaches_read_only(exc: BaseException) -> bool:
    from omegaconf.errors import ReadonlyConfigError

    e: BaseException | None = exc
    while e is not None:
        if isinstance(e, ReadonlyConfigError):
            return True
        e = e.__cause__ or e.__context__
    return False


def _apply_and_resolve(values, cfg, sections) -> None:
    """Hydra's application of the value overrides, then interpolation of the top-level sections
    `sections()` names (asked after the overrides, which may add sections; None: all)."""
    from hydra._internal.config_loader_impl import ConfigLoaderImpl
    from omegaconf import Container, OmegaConf
    from omegaconf.basecontainer import BaseContainer
    from omegaconf.errors import InterpolationResolutionError

    ConfigLoaderImpl._apply_overrides_to_config(values, cfg)
    if sections is None:
        OmegaConf.to_container(cfg, resolve=True)  # as compose_all
        return
    wanted = sections()
    for key in [k for k in cfg.__dict__["_content"] if k in wanted]:  # what to_container does, in its order
        node = cfg._get_child(key, throw_on_missing_value=False)
        try:
            node = node._dereference_node()
        except InterpolationResolutionError as exc:
            cfg._format_and_raise(key=key, value=None, cause=exc)
        if isinstance(node, Container):
            BaseContainer._to_content(node, resolve=True, throw_on_missing=False)


def _check(cfg) -> None:
    from harness import topology
    from harness.cosim.progress import parse_mode
    from harness.experiments import simulate

    parse_mode(cfg.cosim.progress)
    if cfg.task == "simulate" and cfg.workload == "traffic" and cfg.scheme.name == "none":
        simulate.check(cfg)  # what the default experiment refuses before it simulates
        topology.build(cfg.system)


def _points(argv: list[str]) -> list[list]:
    from harness.config.precheck import MULTIRUN, sweep_points

    args = [a for a in argv if not a.startswith("-")]
    try:
        points = sweep_points(args, parse=_parse) if any(a in MULTIRUN for a in argv) else [args]
    except ConfigError:  # _parse's, one line already
        raise
    except Exception as exc:  # noqa: BLE001 - Hydra's parser errors are user errors (as precheck)
        raise _one_line(exc) from None
    return [_parse(p) for p in points[:4]]


def _groups_and_values(overrides):
    groups = tuple(o.input_line for o in overrides if o.key_or_group.split("/")[0] in GROUPS | {"hydra"})
    return groups, [o for o in overrides if o.input_line not in groups]


def run_overrides(argv: list[str]) -> None:
    for overrides in _points(argv):
        groups, values = _groups_and_values(overrides)
        refusal = _sampled_refusal(overrides) if groups else None
        base = refusal or _composed(groups)
        if isinstance(base, ConfigError):
            raise base
        touched = _sections_named(values)
        # A value for a section left cached goes to a full copy at once: OmegaConf refuses most
        # writes to a read-only section but not all (an empty list is assigned silently), so the
        # read-only fallback below cannot guard it. Today every named section is copied and this
        # never fires; it keeps the cache safe if _sections_named copies less (test_fuzz, `none`).
        if (_top_sections(values) - touched) & base.keys:
            _stats["full_copies"] += 1
            _run_point_full(base, values)
            continue
        try:
            with _copy_on_write(base, touched) as cfg:
                try:
                    _apply_and_resolve(values, cfg, lambda: touched | base.interpolated | _added(cfg, base))
                except Exception as exc:  # noqa: BLE001 - as compose_all: every Hydra/OmegaConf error is the user's
                    if _reaches_read_only(exc):
                        raise
                    raise _one_line(exc) from None
                _check(cfg)
        except Exception as exc:  # noqa: BLE001 - a cached section was reached: redo on a full copy
            if not _reaches_read_only(exc):
                raise
        else:
            continue
        _stats["full_copies"] += 1
        _run_point_full(base, values)  # outside the except: its errors must not chain the read-only one


def _top_sections(values) -> set[str]:
    """The top-level sections the value overrides name (a.b.c: a)."""
    return {o.key_or_group.split(".")[0] for o in values}


def _sections_named(values) -> set[str]:
    """The sections to copy: those the value overrides name."""
    return _top_sections(values)


def _added(cfg, base: _Base) -> set[str]:
    return set(cfg.__dict__["_content"]) - base.keys


def _writable_copy(base: _Base):
    cfg = copy.deepcopy(base.cfg)
    for node in cfg.__dict__["_content"].values():
        node._set_flag("readonly", None)
    return cfg


def _run_point_full(base: _Base, values) -> None:
    """One point the slow way: a full copy of the composed config, every interpolation resolved."""
    cfg = _writable_copy(base)
    try:
        _apply_and_resolve(values, cfg, None)
    except Exception as exc:  # noqa: BLE001 - as compose_all
        raise _one_line(exc) from None
    _check(cfg)


def run_overrides_full(argv: list[str]) -> None:
    """The reference: every point on a full copy (what run_overrides must agree with)."""
    for overrides in _points(argv):
        groups, values = _groups_and_values(overrides)
        base = _composed(groups)
        if isinstance(base, ConfigError):
            raise base
        _run_point_full(base, values)


def mutate_argv(seed: list[str], other: list[str], rng: random.Random) -> list[str]:
    argv = list(seed)
    for _ in range(rng.randint(1, 3)):
        op = rng.randrange(6)
        if op == 0 and argv:
            i = rng.randrange(len(argv))
            argv[i] = mutate_text(argv[i], rng.choice(other or [""]), rng)
        elif op in (1, 2):  # a real key with an odd value: the schema's checks, not the parser's
            key = rng.choice(_all_keys())
            value = mutate_text(rng.choice(["0", "1", "-1", "8", "true", "auto", "x", "[1,2]", "1.5"]), "", rng) \
                if op == 1 else rng.choice(["0", "-1", "1", "1e9", "null", "", "abc", "[]"])
            argv.insert(rng.randint(0, len(argv)), f"{key}={value}")
        elif op == 3 and argv:
            del argv[rng.randrange(len(argv))]
        elif op == 4:
            argv.insert(0, "-m")
        elif op == 5 and other:
            argv += other[: rng.randint(0, len(other))]
    return argv


def _keys_of(cfg, prefix: str = "") -> list[str]:
    out = []
    for k, v in cfg.items():
        key = f"{prefix}{k}"
        out += _keys_of(v, key + ".") if hasattr(v, "items") else [key]
    return out


@functools.lru_cache(maxsize=1)
def _all_keys() -> list[str]:
    return _keys_of(_composed(()).cfg) + sorted(GROUPS)
