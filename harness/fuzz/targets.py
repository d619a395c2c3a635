"""The harness parsers under fuzzing, each with its seeds: command-line overrides (Hydra parser,
composition onto the schema, the checks before a run), BookSim config files and validate CSVs.

The override target composes each distinct choice of config groups once (cached) and applies
the value overrides to a copy with Hydra's own override code, so an input costs a fraction of
a millisecond instead of a full composition; `precheck` (the CLI's path, ~20 ms) is a target of
its own for the short run.
"""
from __future__ import annotations

import atexit
import copy
import functools
import os
import random
import shutil
import tempfile
from pathlib import Path

from harness import CONF_DIR, REPO_ROOT
from harness.errors import ConfigError
from harness.fuzz import Target, mutate_text

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


def _one_line(exc: Exception) -> ConfigError:
    from harness.config.precheck import one_line

    return ConfigError("", one_line(exc))


@functools.lru_cache(maxsize=64)
def _composed(groups: tuple[str, ...]):
    """The config composed with these group overrides, or the ConfigError composing gives."""
    from harness.config.precheck import compose_one

    try:
        return compose_one(list(groups))
    except ConfigError as exc:
        return exc


def _keys_of(cfg, prefix: str = "") -> list[str]:
    out = []
    for k, v in cfg.items():
        key = f"{prefix}{k}"
        out += _keys_of(v, key + ".") if hasattr(v, "items") else [key]
    return out


def run_overrides(argv: list[str]) -> None:
    import hydra  # noqa: F401  (hydra._internal imports in this order only)
    from hydra._internal.config_loader_impl import ConfigLoaderImpl
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from omegaconf import OmegaConf

    from harness import topology
    from harness.config.precheck import MULTIRUN, sweep_points
    from harness.cosim.progress import parse_mode
    from harness.experiments import simulate

    args = [a for a in argv if not a.startswith("-")]
    try:
        points = sweep_points(args) if any(a in MULTIRUN for a in argv) else [args]
        parsed = [OverridesParser.create().parse_overrides(p) for p in points[:4]]
    except Exception as exc:  # noqa: BLE001 - Hydra's parser errors are user errors (as precheck)
        raise _one_line(exc) from None
    for overrides in parsed:
        groups = tuple(o.input_line for o in overrides if o.key_or_group.split("/")[0] in GROUPS | {"hydra"})
        base = _composed(groups)
        if isinstance(base, ConfigError):
            raise base
        values = [o for o in overrides if o.input_line not in groups]
        cfg = copy.deepcopy(base) if values else base  # nothing changes the base without values
        try:
            ConfigLoaderImpl._apply_overrides_to_config(values, cfg)
            OmegaConf.to_container(cfg, resolve=True)  # as compose_all
        except Exception as exc:  # noqa: BLE001 - as compose_all: every Hydra/OmegaConf error is the user's
            raise _one_line(exc) from None
        parse_mode(cfg.cosim.progress)
        if cfg.task == "simulate" and cfg.workload == "traffic" and cfg.scheme.name == "none":
            simulate.check(cfg)  # what the default experiment refuses before it simulates
            topology.build(cfg.system)


def run_precheck(argv: list[str]) -> None:
    from harness.config.precheck import precheck

    precheck([a for a in argv if not a.startswith("out_dir")])  # never create folders


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


@functools.lru_cache(maxsize=1)
def _all_keys() -> list[str]:
    base = _composed(())
    return _keys_of(base) + [f"{g}" for g in sorted(GROUPS)]


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
