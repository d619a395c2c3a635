"""One layer (or sub-layer) of an LLM under a scheme on the engines: model + phase + workload ->
operator graph -> the scheme's kernels -> co-simulation -> a results row.

time_us runs from the first kernel's start on any GPU to the last kernel's end on any GPU (for a
sub-layer: from its producer GEMM's start to its consumer GEMM's end, spec section 1.3);
e2e_ms = model.layers x the layer time (workload=layer only; every layer is identical, so the
layer count scales absolute times and leaves speedups alone, spec A3). kernels.csv beside
results.csv has every op's kernels with their start and end (earliest start, latest end over the
GPUs); stats.csv every engine statistic (bytes by packet type per GPU, per-link flits). With the
merge unit on (net.features has cais_merge) the row also has its summary: table high-water marks,
hits, misses, evictions, timeouts, bypasses and the first-to-last wait (harness/merge_stats.py).
A functional run (net.functional=true) checks every collective's result on every GPU
(harness/functional_check.py) and counts the checks in functional_checks; a wrong value fails
the run.
"""
from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
from omegaconf import DictConfig

from harness import functional_check, schemes
from harness.errors import ConfigError
from harness.merge_stats import merge_summary
from harness.results import write_csv_atomic
from harness.schemes.lowering import Target
from harness.cosim.runner import SimResult
from harness.system import run_system
from harness.workload import WORKLOADS as LAYER_WORKLOADS  # noqa: F401  (what simulate dispatches here)
from harness.workload import build, from_config

_KERNEL_STAT = re.compile(r"gpu(\d+)\.kernel(\d+)\.(.+)\.(start|end|sm_us|sync_wait_sm_us)")
_PKT_BYTES = re.compile(r"gpu\d+\.tx\.([A-Z_]+)\.bytes")


def check(cfg: DictConfig) -> None:
    """The keys a layer run reads must make sense together (one-line errors naming the key)."""
    if cfg.scheme.name == "none":
        raise ConfigError("scheme", f"workload={cfg.workload} needs a scheme (choices: {', '.join(schemes.available())})")
    if cfg.system.topology != "dgx":
        raise ConfigError("system", f"layer workloads run on NVSwitch systems (topology dgx), not '{cfg.system.topology}'")
    if int(cfg.model.num_sms) != int(cfg.gpu.num_sms):
        raise ConfigError("model.num_sms", f"model '{cfg.model.name}' is paired with {cfg.model.num_sms} SMs but the "
                          f"system has gpu.num_sms={cfg.gpu.num_sms} (half-scale models run on system=dgx_h100_half; "
                          "set model.num_sms to pair them differently)")


def kernel_times(stats: pd.DataFrame, lowered) -> pd.DataFrame:
    """One row per (op, launch): earliest start and latest end over the GPUs, in us, and the SM
    time its blocks held per GPU (mean over the GPUs, SM-us: an SM for a microsecond; a block
    holds the largest of its thread, register, shared-memory and block-slot shares), the part
    of it they waited on CAIS syncs."""
    rows: dict[int, dict] = {}
    gpus: dict[int, set[int]] = {}
    for name, value in zip(stats["name"], stats["value"]):
        m = _KERNEL_STAT.fullmatch(name)
        if not m or value < 0:
            continue
        li, what = int(m.group(2)), m.group(4)
        r = rows.setdefault(li, {"launch": li, "kernel": m.group(3), "start_us": float("inf"), "end_us": 0.0,
                                 "sm_us": 0.0, "sync_wait_sm_us": 0.0})
        gpus.setdefault(li, set()).add(int(m.group(1)))
        if what == "start":
            r["start_us"] = min(r["start_us"], value / 1e3)
        elif what == "end":
            r["end_us"] = max(r["end_us"], value / 1e3)
        else:
            r[what] += value
    for li, r in rows.items():
        r["sm_us"] /= len(gpus[li])
        r["sync_wait_sm_us"] /= len(gpus[li])
    op_of = {li: op for op, lis in lowered.op_launches.items() for li in lis}
    out = pd.DataFrame(sorted(rows.values(), key=lambda r: r["launch"]))
    out.insert(0, "op", [op_of.get(li, "") for li in out["launch"]])
    return out


def link_utilisation(stats: pd.DataFrame, cfg: DictConfig, span_ps: float) -> float:
    """Mean over the GPU-switch links and both directions of wire bytes / (link rate x span)."""
    s = stats.set_index("name")["value"]
    lanes = list(cfg.system.lanes_per_switch)
    flit = int(cfg.net.flit_bytes)
    used, cap = 0.0, 0.0
    for g in range(int(cfg.system.gpus)):
        for p, n in enumerate(lanes):
            rate = n * float(cfg.system.lane_bw_gbps) * 1e9  # bytes/s
            for key in (f"gpu{g}.port{p}.tx.flits", f"sw{p}.port{g}.tx.flits"):  # up, down
                used += float(s.get(key, 0.0)) * flit
                cap += rate * span_ps * 1e-12
    return used / cap if cap else 0.0


def run(cfg: DictConfig, out_dir: Path) -> pd.DataFrame:
    return run_with_result(cfg, out_dir)[0]


def run_with_result(cfg: DictConfig, out_dir: Path) -> tuple[pd.DataFrame, SimResult]:
    """run(), and the co-simulation's SimResult (events, windows: what cais-bench layer reports)."""
    check(cfg)
    spec = schemes.get(str(cfg.scheme.name))
    params = schemes.params_from_config(spec, cfg.scheme)
    dims = from_config(cfg.model)
    gpus = int(cfg.system.gpus)
    graph = build(dims, str(cfg.phase), str(cfg.workload), spec.partition, gpus)
    lowered = spec.lower(graph, Target(gpus, int(cfg.gpu.num_sms), bool(cfg.net.functional)), params)
    result = run_system(cfg, workload=lowered.workload.SerializeToString(), overrides={"host.gpu_model": "hopper"})
    stats = result.stats
    checks = None
    if bool(cfg.net.functional):  # the values every collective left, on every GPU (before any file is written)
        checks = functional_check.check(dict(zip(stats["name"], stats["value"])), lowered.expectations, gpus)
    kt = kernel_times(stats, lowered)
    write_csv_atomic(out_dir / "stats.csv", stats, exact=True)
    write_csv_atomic(out_dir / "series.csv", result.series)
    write_csv_atomic(out_dir / "kernels.csv", kt)
    if graph.sublayers:
        producer, consumer = graph.sublayers[graph.name]
        start = kt.loc[kt["op"] == producer, "start_us"].min()
        end = kt.loc[kt["op"] == consumer, "end_us"].max()
    else:
        start, end = kt["start_us"].min(), kt["end_us"].max()
    time_us = float(end - start)
    row = {
        "model": dims.name, "phase": str(cfg.phase), "workload": graph.name, "scheme": spec.name,
        "system": str(cfg.system.name), "gpus": gpus, "num_sms": int(cfg.gpu.num_sms), "seed": int(cfg.seed),
        "time_us": round(time_us, 4),
        "e2e_ms": round(time_us * dims.layers / 1e3, 6) if graph.name == "layer" else float("nan"),
        "gemm_tflops_per_gpu": round(graph.gemm_flops() / (time_us * 1e-6) / 1e12, 4) if time_us > 0 else 0.0,
        "link_util": round(link_utilisation(stats, cfg, (end - start) * 1e6), 4),
    }
    for name, value in zip(stats["name"], stats["value"]):
        m = _PKT_BYTES.fullmatch(name)
        if m and value:
            key = f"bytes_{m.group(1).lower()}"
            row[key] = row.get(key, 0) + int(value)
    if checks is not None:
        row["functional_checks"] = checks
    if "cais_merge" in str(cfg.net.features).split(","):
        row.update(merge_summary(stats))  # table high-water marks, hits ... bypasses, waits
    return pd.DataFrame([row]), result
