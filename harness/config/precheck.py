"""Checks made before Hydra starts a run, so that bad input fails as one clear line.

Hydra reports a bad override as a multi-line message (or, under ``-m``, a traceback), and it
creates the run folder itself, failing with a traceback when ``out_dir`` cannot be made. So the
CLI composes the config once per point up front (every point of a ``-m`` sweep) and checks
``out_dir`` before handing over to Hydra.
"""
from __future__ import annotations

import importlib.util
import itertools
import os
import re
from pathlib import Path

from harness import CONF_DIR
from harness.errors import ConfigError

# Hydra flags after which the command line is not a run (Hydra prints something and exits).
NOT_A_RUN = ("--hydra-help", "--info", "--cfg", "-c", "--resolve", "--package", "-p", "--shell-completion", "-sc")
# Those of them that compose the command line's config and show it: a bad override must still be
# one line. The flags that take a value (Hydra's argparse), and --info's optional one.
SHOWS_CONFIG = ("--info", "--cfg", "-c", "--resolve")
FLAG_VALUE = ("--cfg", "-c", "--package", "-p")
INFO_TOPICS = ("all", "config", "defaults", "defaults-tree", "plugins", "searchpath")
MULTIRUN = ("-m", "--multirun")
# Composing is cheap (~20 ms), but a sweep of thousands of points is checked by its first points only.
MAX_POINTS_CHECKED = 256
# Values one sweep axis may take: Hydra's sweeper lists every value of a range() before the first
# run, so range(1,1e3094) would never start (found by fuzzing); a larger axis is refused.
MAX_AXIS_VALUES = 100_000
MAX_SEED = 2**64 - 1  # the engines' seed is an unsigned 64-bit number


def _parses(override: str) -> bool:
    from hydra.core.override_parser.overrides_parser import OverridesParser

    try:
        OverridesParser.create().parse_overrides([override])
        return True
    except Exception:  # noqa: BLE001 - Hydra's parse errors have several types
        return False


def one_line(exc: BaseException, overrides: list[str] = ()) -> str:
    """Hydra/OmegaConf errors span several lines; users get the key, the problem, the choices
    (`overrides`: the command line's, to name the one Hydra could not parse)."""
    texts = []
    e: BaseException | None = exc
    while e is not None:
        texts.append(str(e))
        e = e.__cause__ or e.__context__
    text = "\n".join(texts)
    lines = [l.strip() for l in text.splitlines() if l.strip()]
    ambiguous = re.search(r"Ambiguous value for argument '([^'=]+)=([^']*)'", text)
    if ambiguous:  # Hydra's three hints, in one line
        key, value = ambiguous.groups()
        return (f"{key}: '{value}' has a comma: for a list write {key}=[{value}], for one string quote it "
                f"({key}='{value}'), to sweep add -m")
    if type(exc).__name__ == "OverrideParseException":
        problem = next((t.splitlines()[0] for t in texts[1:] if t.strip()), lines[0] if lines else "")
        bad = next((o for o in overrides if not _parses(o)), None)
        return (f"cannot parse the override {bad or 'on the command line'!r} ({problem}); quote a value with "
                f"spaces, brackets or non-ASCII characters: key='value'")
    key = next((l.split(":", 1)[1].strip() for l in lines if l.startswith("full_key:")), "")
    if "Available options in" in text:
        missing = re.search(r"Could not find '([^']+)'", text)
        opts = [l for l in lines[lines.index(next(l for l in lines if l.startswith("Available options"))) + 1:]
                if not l.startswith(("Config search path", "provider=", "Set the environment"))]
        what = missing.group(1) if missing else "config"
        return f"{what}: no such config; available: {', '.join(opts)}"
    m = re.search(r"Key '([^']+)' (?:is )?not in", text)
    if m:
        return f"{key or m.group(1)}: unknown config key (see `cais-sim describe` for every key)"
    detail = next((l for l in lines if not l.startswith(("Could not override", "Error merging", "To append",
                                                         "full_key", "reference_type", "object_type",
                                                         "Set the environment"))), lines[0] if lines else "")
    return f"{key}: {detail}" if key else detail


def sweep_points(overrides: list[str], parse=None) -> list[list[str]]:
    """Every combination of a -m command line's overrides (a,b,c / range() / choice()), as
    Hydra's basic sweeper expands them; a plain run is one point. `parse`: Hydra's
    `parse_overrides` unless given (the fuzz target passes a cached one)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parsed = (parse or OverridesParser.create().parse_overrides)(overrides)
    axes = []
    for o in parsed:
        key = o.get_key_element()
        if o.is_sweep_override():
            values = list(itertools.islice(o.sweep_string_iterator(), MAX_AXIS_VALUES + 1))
            if len(values) > MAX_AXIS_VALUES:
                text = (o.input_line or "").partition("=")[2] or "of this axis"
                raise ConfigError(key, f"the sweep {text} has more than "
                                       f"{MAX_AXIS_VALUES} values (at most {MAX_AXIS_VALUES} per axis)")
        else:
            values = [o.get_value_element_as_str()]
        axes.append([f"{key}={v}" for v in values])
    return [list(p) for p in itertools.islice(itertools.product(*axes), MAX_POINTS_CHECKED)]


def compose_all(points: list[list[str]]) -> list:
    """The composed config of each list of overrides; ConfigError (one line) for the first bad one."""
    from hydra import compose, initialize_config_dir

    from harness.config.schema import register

    register()
    from omegaconf import OmegaConf

    try:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            cfgs = [compose(config_name="config", overrides=p) for p in points]
        for cfg in cfgs:  # interpolations (seed=${x}) resolve lazily: a bad one must fail here, not mid-run
            OmegaConf.to_container(cfg, resolve=True)
        return cfgs
    except Exception as exc:  # Hydra and OmegaConf raise many types; all are user errors here
        raise ConfigError("", one_line(exc, [o for p in points for o in p])) from None


def compose_one(overrides: list[str]):
    return compose_all([overrides])[0]


_ABSENT = object()  # OmegaConf.select's answer for a key the config does not have


def check_appended(overrides: list[str]) -> None:
    """Hydra's +key=value (and ++) adds a key the config does not have; no run reads one, so it is
    as unknown as a misspelt key (config groups, key/name=..., are Hydra's own business)."""
    added = [o for o in overrides if o.startswith("+") and "/" not in o.partition("=")[0]]
    if not added:
        return
    from omegaconf import OmegaConf

    base = compose_one([o for o in overrides if o not in added])
    for o in added:
        key = o.partition("=")[0].lstrip("+")
        if OmegaConf.select(base, key, default=_ABSENT) is _ABSENT:
            raise ConfigError(key, "unknown config key (see `cais-sim describe` for every key)")


def check_launcher(overrides: list[str]) -> None:
    """What the sweep's launcher would only find out once the points are handed to it (a
    traceback from inside Hydra)."""
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        launcher = compose(config_name="config", overrides=overrides, return_hydra_config=True).hydra.launcher
    module = str(launcher.get("_target_", "")).rpartition(".")[0]
    if module:
        try:
            found = importlib.util.find_spec(module) is not None
        except ImportError:  # a missing parent package
            found = False
        if not found:  # the cluster launchers are optional: pyproject.toml's `cluster` extra
            raise ConfigError("hydra/launcher", f"its Hydra plugin ({module}) is not installed; allowed: basic, "
                                                "joblib, or .venv/bin/pip install '.[cluster]' for slurm and ray")
    n_jobs = launcher.get("n_jobs")
    if n_jobs is not None and int(n_jobs) == 0:
        raise ConfigError("hydra.launcher.n_jobs", "0 runs nothing in joblib; allowed: a count of points at once, "
                                                   "or -1 for one per core (what figure.jobs=0 means)")


def check_out_dir(path) -> None:
    """out_dir must be a folder this process can create and write in."""
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise ConfigError("out_dir", f"{p} is a file; allowed: a folder (created if missing)")
    try:
        p.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError("out_dir", f"cannot create {p}: {exc.strerror or exc}; allowed: a folder this user "
                          "can create") from None
    if not os.access(p, os.W_OK | os.X_OK):
        raise ConfigError("out_dir", f"{p} is not writable by this user")


def check_read(overrides: list[str], task: str, cfg=None) -> None:
    """A command-line key the experiment never reads (in the run cfg) is an error, not a run
    without it."""
    from harness import experiments

    groups = experiments.ignored_keys(task, cfg)
    for o in overrides:
        key = o.partition("=")[0].lstrip("+~")
        for ignored, case in groups:
            hit = next((k for k in ignored if key == k or key.startswith(k + ".")), None)
            if hit is not None:
                what = "it" if hit == key else hit
                raise ConfigError(key, f"experiment {task} does not read {what}{' ' + case if case else ''}; "
                                       "remove it")


def check_shown(argv: list[str]) -> None:
    """`--cfg job model=foo` composes like a run: its overrides fail as one line, not as Hydra's
    multi-line message (the flags and their values are left out)."""
    overrides, skip = [], False
    for prev, a in zip([""] + argv, argv):
        if skip or (prev == "--info" and a in INFO_TOPICS):
            skip = False
            continue
        if a in FLAG_VALUE:
            skip = True
        elif not a.startswith("-"):
            overrides.append(a)
    compose_all(_points(argv, overrides))


def _points(argv: list[str], overrides: list[str]) -> list[list[str]]:
    """The overrides of every point the command line runs: a -m sweep's, or the one run's."""
    if not any(a in MULTIRUN for a in argv):
        return [overrides]
    try:
        return sweep_points(overrides)
    except Exception as exc:  # a malformed override: Hydra's parser says where
        raise ConfigError("", one_line(exc, overrides)) from None


def precheck(argv: list[str]) -> None:
    """Compose every point of the command line and check its out_dir; ConfigError on the first
    problem (the CLI prints it as one line)."""
    if any(a in NOT_A_RUN or a.startswith("--cfg") for a in argv):
        if any(a in SHOWS_CONFIG or a.startswith("--cfg=") for a in argv) and "--hydra-help" not in argv:
            check_shown(argv)
        return
    points = _points(argv, [a for a in argv if not a.startswith("-")])
    cfgs = compose_all(points)
    check_appended(points[0])
    if any(a in MULTIRUN for a in argv):
        check_launcher(points[0])
    from harness.cosim.progress import parse_mode

    for point, cfg in zip(points, cfgs):
        check_read(point, str(cfg.task), cfg)
        parse_mode(cfg.cosim.progress)
        if not 0 <= cfg.seed <= MAX_SEED:
            raise ConfigError("seed", f"must be 0 to {MAX_SEED}, got {cfg.seed}")
        if cfg.out_dir:
            check_out_dir(cfg.out_dir)
