"""experiment=net_synthetic: the network engine alone on a BookSim-style config.

    cais-sim experiment=net_synthetic net.booksim_config=conf/booksim/fly8_uniform.cfg \\
        'net.injection_rates=[0.05,0.1,0.2,0.3,0.4,0.5,0.6,0.65,0.7,0.8]' out_dir=/tmp/fly8

Runs ``cais-net-synthetic`` (built next to cais-engine, see harness.engines.engine_dir()) once
per injection rate (``net.injection_rates``, in the file's units; default: the file's own
``injection_rate``) and returns one row per rate: offered (flits/node/cycle),
avg_packet_latency_cycles, accepted_flits_per_node_cycle, wall_s, then extras (stable,
measured_packets, sim_cycles, delivered_flits, events, rates per wall second; the CLI moves the
wall-clock columns to timing.csv). The file is
validated first by harness.booksim_config (unknown or unsupported keys are errors naming the
key). The run's seed is the file's ``seed`` if it sets one, else the config's ``seed``.
"""
from __future__ import annotations

import io
import subprocess
from pathlib import Path

import pandas as pd
from omegaconf import DictConfig

from harness import REPO_ROOT, booksim_config, engines
from harness.cosim import progress
from harness.errors import ConfigError, EngineError

BINARY = "cais-net-synthetic"
COLUMNS = ["offered", "avg_packet_latency_cycles", "accepted_flits_per_node_cycle", "wall_s"]


def _config_path(value) -> Path:
    if not value:
        raise ConfigError("net.booksim_config", "must name a BookSim-style config file "
                          "(e.g. net.booksim_config=conf/booksim/fly8_uniform.cfg)")
    p = Path(str(value))
    if not p.is_absolute() and not p.exists() and (REPO_ROOT / p).exists():
        p = REPO_ROOT / p
    return p


def run_one(binary: Path, path: Path, overrides: list[str], timeout_s: float = 3600) -> pd.DataFrame:
    proc = subprocess.run([str(binary), str(path), *overrides], capture_output=True, text=True, timeout=timeout_s)
    if proc.returncode != 0:
        lines = proc.stderr.strip().splitlines()
        if proc.returncode == 2 and lines and "configuration error" in lines[-1]:
            msg = lines[-1].split("configuration error: ", 1)[-1]
            key, _, what = msg.partition(": ")
            raise ConfigError(key, what or msg)
        raise EngineError(BINARY, f"exited with status {proc.returncode}", proc.stderr[-3000:])
    return pd.read_csv(io.StringIO(proc.stdout))


def run(cfg: DictConfig, out_dir: Path) -> pd.DataFrame:
    path = _config_path(cfg.net.booksim_config)
    bc = booksim_config.load(path)
    rates = [float(r) for r in (cfg.net.injection_rates or [])] or [bc.injection_rate]
    for r in rates:
        bc.check_rate(r)
    binary = engines.engine_binary(BINARY)
    seed = [] if "seed" in bc.given else [f"seed={int(cfg.seed)}"]
    frames = []
    reporter = progress.current()
    for i, rate in enumerate(rates):
        if reporter is not None:
            reporter.work(i, len(rates), "rates")
        df = run_one(binary, path, [f"injection_rate={rate!r}", *seed])
        df.insert(4, "injection_rate", rate)
        frames.append(df)
    out = pd.concat(frames, ignore_index=True)
    out["config"] = path.name
    return out
