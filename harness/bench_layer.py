"""`cais-bench layer`: the cost of simulating one LLM layer (or sub-layer) under a scheme.

Runs exactly what `cais-sim model=M system=S phase=P workload=W scheme=X [KEY=VALUE ...]` runs
(harness.layer_sim) and reports, as JSON: wall time, CPU time (harness and engine processes),
events the engines processed, events per CPU-second and per wall-second, packets (packet-hops
over links, summed over every GPU and switch output port), peak resident memory (largest engine
process and the harness), and the simulated layer time. Extra Hydra overrides go after `--`
(`cais-bench layer --scheme t3_nvls -- gpu.bulk_lines=4`). With `--lines 1,4,16` it runs once per
gpu.bulk_lines value and adds each run's deviation from the first (the convergence of bulk
packets: simulated time, link utilisation, merge-table high-water mark, bytes per packet type).
"""
from __future__ import annotations

import argparse
import os
import resource
import tempfile
import time
from pathlib import Path

import pandas as pd


def _usage_self() -> resource.struct_rusage:
    return resource.getrusage(resource.RUSAGE_SELF)


def _usage_children() -> resource.struct_rusage:
    return resource.getrusage(resource.RUSAGE_CHILDREN)  # engines that have exited and been waited for


def _cpu(ru: resource.struct_rusage) -> float:
    return ru.ru_utime + ru.ru_stime


def overrides(model: str, phase: str, scheme: str, system: str, workload: str, extra: list[str]) -> list[str]:
    return [f"model={model}", f"phase={phase}", f"scheme={scheme}", f"system={system}", f"workload={workload}",
            "cosim.progress=false", *extra]


def summarise(stats: pd.DataFrame, row: pd.Series, events: int) -> dict:
    """Events, packets and simulated time of a finished layer run (its stats and results row).
    Packets are line packets (a bulk packet of N lines counts N), summed over link hops."""
    names = stats["name"]
    packets = int(stats.loc[names.str.fullmatch(r"(gpu|sw)\d+\.port\d+\.tx\.packets"), "value"].sum())
    high_water = stats.loc[names.str.endswith(".high_water_entries"), "value"]
    return {"events": events, "packets": packets, "sim_time_us": float(row["time_us"]),
            "link_util": float(row["link_util"]),
            "merge_high_water_entries": int(high_water.max()) if len(high_water) else 0,
            "bytes": {k: int(v) for k, v in row.items() if k.startswith("bytes_")}}


def _rel(a: float, b: float) -> float:
    return round((a - b) / b, 5) if b else 0.0


def convergence(runs: list[dict]) -> list[dict]:
    """Each run's deviation from the first (relative; bytes: whether every type is equal)."""
    ref = runs[0]
    return [{"bulk_lines": r["bulk_lines"], "time": _rel(r["sim_time_us"], ref["sim_time_us"]),
             "link_util": _rel(r["link_util"], ref["link_util"]),
             "merge_high_water": _rel(r["merge_high_water_entries"], ref["merge_high_water_entries"]),
             "bytes_equal": r["bytes"] == ref["bytes"], "events": _rel(r["events"], ref["events"]),
             "cpu_s": _rel(r["cpu_s"], ref["cpu_s"])} for r in runs]


def bench_layer(model: str, phase: str, scheme: str, system: str, workload: str, extra: list[str]) -> dict:
    from harness import layer_sim
    from harness.config.precheck import compose_one

    cfg = compose_one(overrides(model, phase, scheme, system, workload, extra))
    self0, child0 = _usage_self(), _usage_children()
    wall0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="cais-bench-layer-") as tmp:
        frame, result = layer_sim.run_with_result(cfg, Path(tmp))
        wall = time.perf_counter() - wall0
    self1, child1 = _usage_self(), _usage_children()
    harness_cpu, engines_cpu = _cpu(self1) - _cpu(self0), _cpu(child1) - _cpu(child0)
    out = {"model": model, "phase": phase, "scheme": scheme, "system": system, "workload": workload,
           "overrides": extra, "wall_s": round(wall, 2), "cpu_s": round(harness_cpu + engines_cpu, 2),
           "engines_cpu_s": round(engines_cpu, 2), "harness_cpu_s": round(harness_cpu, 2)}
    out.update(summarise(result.stats, frame.iloc[0], result.events))
    # Lock-step windows run (idle stretches are skipped): with the events, what a window costs.
    # A lone engine process runs in slices of events, not windows: window_ns is then null.
    out["windows"] = result.windows
    out["window_ns"] = result.window_ps / 1000 if len(result.engines) > 1 else None
    cpu = harness_cpu + engines_cpu
    out["events_per_cpu_s"] = round(out["events"] / cpu) if cpu > 0 else 0
    out["events_per_wall_s"] = round(out["events"] / wall) if wall > 0 else 0
    out["peak_rss_mb"] = {"engine": round(child1.ru_maxrss / 1024, 1), "harness": round(self1.ru_maxrss / 1024, 1)}
    out["cores"] = os.cpu_count()
    return out


def add_parser(sub) -> None:
    p = sub.add_parser("layer", help="cost of one layer simulation: wall, CPU, events, packets, memory")
    p.add_argument("--model", default="llama_7b")
    p.add_argument("--phase", default="training", choices=["inference", "training"])
    p.add_argument("--scheme", default="tp_nvls")
    p.add_argument("--system", default="dgx_h100_half")
    p.add_argument("--workload", default="layer", help="layer, or sublayer_l1..sublayer_l4")
    p.add_argument("--lines", default="", help="comma-separated gpu.bulk_lines values: one run each, "
                   "with the deviation of each from the first")
    p.add_argument("extra", nargs="*", help="more KEY=VALUE overrides, after --")


def bench_layers(args) -> dict:
    """`cais-bench layer`: one run, or one per --lines value with the convergence table."""
    if not args.lines:
        return bench_layer(args.model, args.phase, args.scheme, args.system, args.workload, args.extra)
    runs = []
    for n in [int(x) for x in args.lines.split(",") if x]:
        r = bench_layer(args.model, args.phase, args.scheme, args.system, args.workload,
                        [*args.extra, f"gpu.bulk_lines={n}"])
        r["bulk_lines"] = n
        runs.append(r)
    return {"runs": runs, "convergence": convergence(runs)}
