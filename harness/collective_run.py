"""One collective as the library's tile-ISA kernel on the Hopper engine: ``cais-sim
workload=collective collective.op=OP collective.algo=ring|nvls collective.bytes=B system=S``.

The kernel is the one the schemes run (harness/kernels/ring.py: NCCL's ring, Simple protocol;
harness/kernels/nvls.py: NCCL's NVLS algorithm, all_reduce only), launched once on every GPU of
the system, with `collective.channels` ring channels or `collective.nvls_channels` NVLS
channels; the size is rounded up to whole 128 B parts per channel and GPU (as validate_collectives'
ISA rows). The SMs run at the power model's clock for memory-bound work (a collective alone keeps
the GPU's power low; harness/gpu/power.py), a fixed `gpu.clock_mhz` stays. The NCCL-like
`collective` GPU model is the other way to run one (system.gpu_model=collective with
workload=traffic): the reference these kernels are checked against (docs/VALIDATION.md).

results.csv: system, gpus, op, algo, bytes, channels, sim_time_us (from the first GPU's kernel
start to the last GPU's kernel end), algbw_GBps and busbw_GBps (nccl-tests' formulas), and the
payload bytes all GPUs sent per packet type; stats.csv and series.csv beside it.

A functional run (net.functional=true) checks its own result: every GPU's input starts at its
rank + 1 (isa.proto Buffer.init_rank, so no kernel runs before the collective and the times are
the timing run's), and the tensor each GPU holds afterwards is compared with what the collective
leaves (harness/functional_check.py; ring.functional_result for the ring's parts); a wrong value
fails the run before any file is written, and results.csv counts the checks (functional_checks).
"""
from __future__ import annotations

from dataclasses import fields
from pathlib import Path

import pandas as pd
from omegaconf import DictConfig

from harness import functional_check
from harness.cosim import simulate
from harness.errors import ConfigError
from harness.experiments.validate_collectives import ALGOS, OPS, bus_factor, isa_bytes, isa_span_us, isa_workload
from harness.kernels import ring
from harness.params.collective import CollectiveParams
from harness.results import write_csv_atomic
from harness.system import cosim_options, engine_params
from harness import topology

# What this run reads of the collective section; the rest is the NCCL-like model's.
READS = ("op", "algo", "bytes", "channels", "nvls_channels")
PACKET_TYPES = ("WRITE", "READ_RESP", "MM_ST")


def ignored_collective_keys() -> tuple[str, ...]:
    return tuple(f"collective.{f.name}" for f in fields(CollectiveParams) if f.name not in READS)


def check(cfg: DictConfig) -> None:
    c = cfg.collective
    if c.op not in OPS:
        raise ConfigError("collective.op", f"'{c.op}' is not one of: {', '.join(OPS)}")
    if c.algo not in ALGOS:
        raise ConfigError("collective.algo", f"'{c.algo}' is not one of: {', '.join(ALGOS)}")
    if c.algo == "nvls" and c.op != "all_reduce":
        raise ConfigError("collective.op", f"'{c.op}' with collective.algo=nvls: the NVLS kernel runs all_reduce only")
    if int(c.bytes) < 1:
        raise ConfigError("collective.bytes", f"must be >= 1, got {c.bytes}")
    name = "nvls_channels" if c.algo == "nvls" else "channels"
    if int(c[name]) < 1:
        raise ConfigError(f"collective.{name}", f"must be >= 1, got {c[name]}")
    if int(cfg.system.gpus) < 2:
        raise ConfigError("system.gpus", f"must be >= 2 for a collective, got {cfg.system.gpus}")
    if cfg.system.topology != "dgx":
        raise ConfigError("system", f"workload=collective runs on NVSwitch systems (topology dgx), not "
                          f"'{cfg.system.topology}'")
    if cfg.scheme.name != "none":
        raise ConfigError("scheme", f"workload=collective runs no scheme, got scheme={cfg.scheme.name}")


def run(cfg: DictConfig, out_dir: Path) -> pd.DataFrame:
    check(cfg)
    c, gpus = cfg.collective, int(cfg.system.gpus)
    params = engine_params(cfg, kind="memory")
    row = pd.Series({"name": "collective", "gpus": gpus, "op": str(c.op), "algo": str(c.algo), "bytes": int(c.bytes)})
    if c.algo == "nvls":
        feats = [f for f in str(params.get("net.features", "")).split(",") if f]
        if "nvls" not in feats:  # the kernel's multimem instructions need the switch's NVLS
            raise ConfigError("net.features", f"collective.algo=nvls needs the switch feature nvls (got "
                              f"'{params.get('net.features', '')}'; e.g. net.features=nvls)")
    workload = isa_workload(cfg, row, params)
    res = simulate(topology.build(cfg.system), params, seed=int(cfg.seed), workload=workload, **cosim_options(cfg))
    st = res.stats
    time_us = isa_span_us(st, gpus, "collective", f"{c.algo} {c.op} of {c.bytes} bytes")  # before any file
    checks = check_values(cfg, st, params) if bool(cfg.net.functional) else None
    write_csv_atomic(out_dir / "stats.csv", st, exact=True)
    write_csv_atomic(out_dir / "series.csv", res.series)
    algbw = int(c.bytes) / (time_us * 1e3)
    out = {"system": cfg.system.name, "gpus": gpus, "workload": "collective", "op": str(c.op), "algo": str(c.algo),
           "bytes": int(c.bytes), "channels": int(c.nvls_channels if c.algo == "nvls" else c.channels),
           "clock_mhz": float(params["gpu.clock_mhz"]), "sim_time_us": time_us, "algbw_GBps": algbw,
           "busbw_GBps": algbw * bus_factor(str(c.op), gpus)}
    for t in PACKET_TYPES:  # payload bytes all GPUs sent, per packet type
        out[f"bytes_{t.lower()}"] = int(st[st["name"].str.fullmatch(rf"gpu\d+\.tx\.{t}\.bytes")]["value"].sum())
    if checks is not None:
        out["functional_checks"] = checks
    return pd.DataFrame([out])


def check_values(cfg: DictConfig, st: pd.DataFrame, params: dict) -> int:
    """The tensor on every GPU against what the collective leaves there (each GPU's input was its
    rank + 1); the number of GPUs checked. A difference is a SimulationError naming the GPU."""
    c, gpus = cfg.collective, int(cfg.system.gpus)
    channels = int(params["collective.nvls_channels" if c.algo == "nvls" else "collective.channels"])
    nbytes = isa_bytes(int(c.bytes), channels, gpus)
    if c.algo == "nvls":  # all_reduce in place on the multicast tensor
        want = functional_check.Reduced("data", nbytes // 2)
    else:
        want = functional_check.Computed(
            "data", lambda g: ring.functional_result(str(c.op), g, gpus, channels, nbytes))
    stats = dict(zip(st["name"], st["value"]))
    return functional_check.check(stats, {f"{c.algo} {c.op}": want}, gpus)
