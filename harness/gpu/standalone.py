"""Run workloads on the GPU engine's file-driven main (``cais-gpu-standalone``), no ZMQ.

One process, GPUs without links: for single-GPU kernel validation, calibration and unit tests.
Multi-GPU workloads through switches go through the co-simulator (harness.cosim.simulate).
"""
from __future__ import annotations

import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Iterable

from harness.cosim import to_param_value
from harness.engines import engine_dir
from harness.errors import CaisError, ConfigError
from harness.gpu import power
from harness.params.gpu import defaults as gpu_defaults
from harness.protocol import cosim as pb

BINARY = "cais-gpu-standalone"


def gpu_params(overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """Every gpu.* key with its default, updated by `overrides` (keys with or without 'gpu.')."""
    out = gpu_defaults()
    for k, v in (overrides or {}).items():
        key = k if k.startswith("gpu.") else f"gpu.{k}"
        if key not in out:
            raise ConfigError(key, "unknown GPU parameter")
        out[key] = v
    return out


def configure(workload, params: dict[str, Any], *, num_gpus: int = 1, seed: int = 0) -> "pb.Configure":
    cfg = pb.Configure()
    cfg.engine_name = "gpu_standalone"
    for g in range(num_gpus):
        cfg.topology.nodes.add(id=g, kind=pb.NODE_GPU, name=f"gpu{g}", num_ports=0)
        cfg.hosted_nodes.append(g)
        cfg.node_engine.append(0)
    cfg.topology.name = f"standalone{num_gpus}"
    full = power.resolve_clock(dict(params))
    full.setdefault("host.gpu_model", "hopper")
    full.setdefault("host.switch_model", "none")
    for k, v in full.items():
        cfg.params[k].CopyFrom(to_param_value(v))
    cfg.seed = seed
    cfg.workload = workload.SerializeToString() if hasattr(workload, "SerializeToString") else workload
    cfg.window_ps = 250000
    return cfg


def binary() -> Path:
    path = engine_dir() / BINARY
    if not path.is_file():
        raise ConfigError("engine binary", f"{path} not found; build the engines (scripts/build_engines.sh) "
                          "or set CAIS_ENGINE_DIR")
    return path


def run(workload, overrides: dict[str, Any] | None = None, *, num_gpus: int = 1, seed: int = 0,
        exe: Path | None = None) -> dict[str, float]:
    """Simulate `workload` (isa.Workload) and return {stat name: value}."""
    cfg = configure(workload, gpu_params(overrides), num_gpus=num_gpus, seed=seed)
    with tempfile.TemporaryDirectory(prefix="cais-gpu-") as d:
        cpath, spath = Path(d) / "cfg.pb", Path(d) / "stats.pb"
        cpath.write_bytes(cfg.SerializeToString())
        proc = subprocess.run([str(exe or binary()), str(cpath), str(spath)], capture_output=True, text=True)
        if proc.returncode != 0:
            raise CaisError(f"{BINARY} failed (exit {proc.returncode}) on workload '{workload.name}': "
                            f"{proc.stderr.strip()[-2000:]}")
        stats = pb.Stats()
        stats.ParseFromString(spath.read_bytes())
    return {s.name: s.value for s in stats.stats}


def run_many(workloads: Iterable, overrides_list: Iterable[dict[str, Any] | None], *, jobs: int = 2,
             seed: int = 0) -> list[dict[str, float]]:
    """run() over pairs, `jobs` processes at a time (results in input order)."""
    exe = binary()
    pairs = list(zip(workloads, overrides_list))
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        return list(pool.map(lambda p: run(p[0], p[1], seed=seed, exe=exe), pairs))


def kernel_time_us(stats: dict[str, float], gpu: int = 0) -> float:
    """Simulated kernel time: from time 0 (host enqueue) to the last launch's end on `gpu`."""
    return stats[f"gpu{gpu}.finish_time"] / 1e6
