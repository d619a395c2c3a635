"""validate_concurrent: a GEMM and a memory-streaming kernel on two streams of one GPU.

Reads ``validate.input`` (CSV, one row per case: name,M,N,K,stream_kind,ctas,bytes,order,
start_gap_us and optionally the measured gemm_us, stream_us, makespan_us, gemm_alone_us,
stream_alone_us, sm_clock_mhz; default: harness/data/validation/concurrent_h100.csv, made from
harness/data/measured/h100_concurrent.csv). Per row it builds one tile-ISA workload with the
GEMM (the recorded cuBLAS plan for the row's name and shape, else the heuristic, as
validate_kernels) and the streaming kernel of harness.gpu.stream_kernel on its own stream;
`order` says which is launched first (stream_first / gemm_first) and the second launch is
released start_gap_us later (when the host launched it: a condition of the experiment). The SM
clock is burst_clock_mhz of the load running: the GEMM's while it runs, the streaming kernel's
otherwise (the measured sm_clock_mhz is kept for comparison, not used). It runs that workload, and each kernel alone, on the Hopper
engine (one GPU, no network) and adds sim_gemm_us, sim_stream_us, sim_makespan_us (from each
kernel's first CTA to its end, as CUPTI timed the measured kernels: _spans),
sim_gemm_alone_us, sim_stream_alone_us and, where measured, err_*_pct = 100 (sim - measured) /
measured. A gemm_first streaming kernel starts either beside the GEMM, on SMs its last CTAs free,
or after it, on an idle GPU, about half of the repetitions each (a race of microseconds), so the
median mixes the two: where the input has them (reps, reps_beside, stream_beside_us,
stream_after_us: start_modes), err_stream_beside_pct compares the engine's streaming kernel
that started beside its GEMM with the repetitions that did, and err_stream_after_pct the
engine's kernel alone with those that started after.
"""
from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from omegaconf import DictConfig, OmegaConf

from harness import REPO_ROOT
from harness.errors import ConfigError
from harness.experiments import _input_csv
from harness.experiments import validate_kernels as vk
from harness.gpu import kernels, power, standalone, stream_kernel

DEFAULT_INPUT = REPO_ROOT / "harness" / "data" / "validation" / "concurrent_h100.csv"
REQUIRED = ("name", "M", "N", "K", "stream_kind", "ctas", "bytes", "order", "start_gap_us")
ORDERS = ("stream_first", "gemm_first")
# Each row is one GPU's kernels from the row's shape: no layer workload, scheme or traffic.
IGNORED_KEYS = ("model", "phase", "workload", "scheme", "traffic", "validate.stats", "validate.kernels",
                "validate.gemm")
MEASURED = ("gemm_us", "stream_us", "makespan_us", "gemm_alone_us", "stream_alone_us")
# The stamp kernel queued behind the GEMM starts up to ~1.3 us after its last CTA (measured: a
# streaming kernel that started within that was placed as on an idle GPU, one CTA per SM).
STAMP_LAUNCH_US = 2.0


def load_input(path: str | os.PathLike | None) -> pd.DataFrame:
    """The rows of the input CSV, checked: a bad file or row is one line naming it."""
    p = _input_csv.resolve(path, DEFAULT_INPUT)
    _input_csv.check_fields(p, "validate.input")
    try:
        df = pd.read_csv(p)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as e:
        raise ConfigError("validate.input", f"{p} is not a readable CSV ({str(e).splitlines()[0]})") from None
    missing = [c for c in REQUIRED if c not in df.columns]
    if missing:
        raise ConfigError("validate.input", f"{p} lacks columns {missing} (needs {', '.join(REQUIRED)})")
    if df.empty:
        raise ConfigError("validate.input", f"{p} has no rows")
    for i, (_, row) in enumerate(df.iterrows()):  # not the index: a row with extra fields makes it a name
        where = f"{p} row {i + 2}"  # line number in the file (header is line 1)
        for c in ("M", "N", "K", "ctas", "bytes"):
            v = pd.to_numeric(row[c], errors="coerce")
            if not (v == v and v >= 1 and float(v).is_integer()):
                raise ConfigError("validate.input", f"{where}: {c}={row[c]!r} must be a positive integer")
        gap = pd.to_numeric(row["start_gap_us"], errors="coerce")
        if not (gap == gap and gap >= 0):
            raise ConfigError("validate.input", f"{where}: start_gap_us={row['start_gap_us']!r} must be a number >= 0")
        if row["stream_kind"] not in stream_kernel.KINDS:
            raise ConfigError("validate.input", f"{where}: stream_kind={row['stream_kind']!r} "
                                                f"(allowed: {', '.join(stream_kernel.KINDS)})")
        if row["order"] not in ORDERS:
            raise ConfigError("validate.input", f"{where}: order={row['order']!r} (allowed: {', '.join(ORDERS)})")
    return df.reset_index(drop=True)


def gemm_workload(row: Any, params: dict[str, Any]):
    """The row's GEMM on the whole GPU (validate_kernels' plan: recorded cuBLAS launch or heuristic)."""
    grow = {"name": row["name"], "kind": "gemm", "M": row["M"], "N": row["N"], "K": row["K"],
            "num_sms": vk.DEVICE_SMS}
    return vk.build(grow, params)


def pair_workload(gemm_wl, row: Any):
    """GEMM + streaming kernel: the second in `order` released start_gap_us after the first."""
    wl = copy.deepcopy(gemm_wl)
    wl.name = f"{gemm_wl.name}+stream_{row['stream_kind']}{int(row['ctas'])}.{row['order']}"
    gap_ns = float(row["start_gap_us"]) * 1e3
    if row["order"] == "stream_first":
        for la in wl.launches:
            la.start_ns = gap_ns
    stream = 1 + max(la.stream for la in wl.launches)
    stream_kernel.add_stream_kernel(wl, str(row["stream_kind"]), int(row["ctas"]), int(row["bytes"]), stream=stream,
                                    start_ns=gap_ns if row["order"] == "gemm_first" else 0.0)
    return wl


def stream_workload(row: Any):
    wl = kernels.new_workload(f"stream_{row['stream_kind']}{int(row['ctas'])}")
    stream_kernel.add_stream_kernel(wl, str(row["stream_kind"]), int(row["ctas"]), int(row["bytes"]), stream=0)
    return wl


def _spans(stats: dict[str, float], wl) -> list[tuple[float, float]]:
    """(start, end) in us of every launch of wl on GPU 0, started as CUPTI starts a kernel: when
    its first CTA takes an SM. A kernel released while another holds every SM it fits on starts
    only when that one frees SMs (gemm_first: the measured stream kernels start 60-160 us after
    their release), so timing it from its release would count that wait as its run. The
    engine's launch-to-first-block time (gpu.kernel_launch_ns, fitted to CUDA-event times, which
    for the measured GEMMs equal CUPTI's within 1 us: gemm_alone_us vs gemm_alone_event_us)
    stays part of the kernel: start = first CTA - (launch ready - release)."""
    out = []
    for i, la in enumerate(wl.launches):
        key = f"gpu0.kernel{i}.{wl.kernels[la.kernel].name}"
        launch = stats[key + ".start"] - stats[key + ".release"]
        out.append(((stats[key + ".first_cta"] - launch) / 1e3, stats[key + ".end"] / 1e3))
    return out


def _stream_start_vs_gemm_end(stats: dict[str, float], wl) -> float:
    """The streaming kernel's first CTA minus the GEMM's end, us (the pair's last launch is the
    streaming kernel): negative where it started beside the GEMM, on SMs the GEMM freed."""
    def key(i: int) -> str:
        return f"gpu0.kernel{i}.{wl.kernels[wl.launches[i].kernel].name}"
    last = len(wl.launches) - 1
    gemm_end = max(stats[key(i) + ".end"] for i in range(last))
    return (stats[key(last) + ".first_cta"] - gemm_end) / 1e3


def _duration(spans: list[tuple[float, float]]) -> float:
    return max(e for _, e in spans) - min(r for r, _ in spans)


def burst_clock_mhz(params: dict[str, Any], kind: str = "tensor") -> float:
    """The SM clock of `kind` kernels in these rows: gpu.clock_mhz where the user fixed one (for
    the streaming kernel alone gpu.clock_mhz_without_mma, where fixed, before it), else
    the power model's burst clock on every SM (harness/gpu/power.py burst_clock_mhz): while a
    GEMM runs 1650 MHz on an H100's 132 SMs, while only the streaming kernel runs (memory-bound,
    its power the memory system's) the maximum clock. The measured pairs ran in bursts of about
    60 ms from an idle, cool GPU, shorter than the power controller takes to settle to the
    sustained clock (~1400 MHz); NVML read 1860-1980 MHz during them, which is not the clock the
    SMs ran at (an H200's own cycle counters read 1600-1780 MHz in such bursts,
    h200_burst_clock.csv). The measured clock (column sm_clock_mhz) is not an input."""
    # the defaults under what params sets, resolved as every burst run resolves them
    full = power.resolve_burst_clocks(standalone.gpu_params(dict(params)))
    # The clock without mma kernels may be fixed on its own (0: like gpu.clock_mhz); a negative
    # value goes on to the engine, which refuses it by name.
    without_mma = float(full["gpu.clock_mhz_without_mma"])
    return without_mma if kind == "memory" and without_mma != 0 else float(full["gpu.clock_mhz"])


def simulate_rows(df: pd.DataFrame, gpu_params: dict[str, Any], jobs: int | None = None) -> pd.DataFrame:
    df = df.copy()
    base = {k if k.startswith("gpu.") else f"gpu.{k}": v for k, v in gpu_params.items()}
    base["gpu.launch_skew_ns"] = 0.0
    base["gpu.clock_spread_frac"] = 0.0  # one GPU: no spread between GPUs
    slots = vk.measured_cluster_slots(vk.DEVICE_SMS)
    if slots is not None:
        base["gpu.max_clusters_4"] = slots
    jobs_wl, jobs_ov, pairs, gemm_alone, stream_alone, cfgs = [], [], [], {}, {}, []

    def add(wl, ov) -> int:
        jobs_wl.append(wl)
        jobs_ov.append(ov)
        return len(jobs_wl) - 1

    # The clock follows the load (gpu.clock_mhz_without_mma): the GEMM's burst clock while it runs.
    clock, without_mma = burst_clock_mhz(base, "tensor"), burst_clock_mhz(base, "memory")
    for _, row in df.iterrows():
        ov = dict(base)
        ov["gpu.clock_mhz"] = clock
        ov["gpu.clock_mhz_without_mma"] = without_mma
        gwl, desc = gemm_workload(row, ov)
        cfgs.append(desc)
        pwl = pair_workload(gwl, row)
        pairs.append((pwl, add(pwl, ov)))
        gkey = (row["name"], int(row["M"]), int(row["N"]), int(row["K"]))
        if gkey not in gemm_alone:
            gemm_alone[gkey] = (gwl, add(gwl, ov))
        skey = (row["stream_kind"], int(row["ctas"]), int(row["bytes"]))
        if skey not in stream_alone:
            swl = stream_workload(row)
            stream_alone[skey] = (swl, add(swl, ov))
    results = standalone.run_many(jobs_wl, jobs_ov, jobs=jobs or os.cpu_count() or 2)

    sim = {c: [] for c in ("sim_gemm_us", "sim_stream_us", "sim_makespan_us", "sim_gemm_alone_us", "sim_stream_alone_us",
                           "sim_stream_start_vs_gemm_end_us")}
    for (_, row), (pwl, j) in zip(df.iterrows(), pairs):
        spans = _spans(results[j], pwl)
        sim["sim_stream_start_vs_gemm_end_us"].append(_stream_start_vs_gemm_end(results[j], pwl))
        sim["sim_gemm_us"].append(_duration(spans[:-1]))
        sim["sim_stream_us"].append(_duration(spans[-1:]))
        sim["sim_makespan_us"].append(_duration(spans))
        gwl, gj = gemm_alone[(row["name"], int(row["M"]), int(row["N"]), int(row["K"]))]
        swl, sj = stream_alone[(row["stream_kind"], int(row["ctas"]), int(row["bytes"]))]
        sim["sim_gemm_alone_us"].append(_duration(_spans(results[gj], gwl)))
        sim["sim_stream_alone_us"].append(_duration(_spans(results[sj], swl)))
    for c, v in sim.items():
        df[c] = np.round(v, 3)
    df["sim_config"] = cfgs
    for m in MEASURED:
        if m in df.columns:
            meas = pd.to_numeric(df[m], errors="coerce")
            df[f"err_{m[:-3]}_pct"] = np.round(100.0 * (df[f"sim_{m}"] - meas) / meas, 2)
    # Each start mode against its own repetitions: beside the GEMM (the engine's streaming kernel
    # started before the GEMM ended) and after it (on an idle GPU: the engine's kernel alone).
    if "stream_beside_us" in df.columns:
        beside = pd.to_numeric(df["stream_beside_us"], errors="coerce")
        started_beside = df["sim_stream_start_vs_gemm_end_us"] < 0
        df["err_stream_beside_pct"] = np.round(np.where(started_beside, 100.0 * (df["sim_stream_us"] - beside) / beside,
                                                        np.nan), 2)
        after = pd.to_numeric(df["stream_after_us"], errors="coerce")
        df["err_stream_after_pct"] = np.round(100.0 * (df["sim_stream_alone_us"] - after) / after, 2)
    return df


def start_modes(reps: pd.DataFrame) -> pd.DataFrame:
    """Per gemm_first row of measure_concurrent.py's repetitions: how many started beside the GEMM
    (the first streaming CTA more than the stamp's launch before the GEMM's end) and the median
    streaming kernel time of each mode (NaN where a mode never happened)."""
    g = reps[reps["order"] == "gemm_first"].copy()
    g["beside"] = g["gemm_end_us"] > STAMP_LAUNCH_US
    keys = ["name", "stream_kind", "ctas", "order"]
    out = g.groupby(keys).agg(reps=("rep", "size"), reps_beside=("beside", "sum"))
    for mode, sel in (("beside", g["beside"]), ("after", ~g["beside"])):
        out[f"stream_{mode}_us"] = g[sel].groupby(keys)["stream_us"].median().round(3)
    return out.reset_index()


def write_input(measured: str | os.PathLike, out: str | os.PathLike, reps: str | os.PathLike | None = None) -> int:
    """The validation input from a measure_concurrent CSV. start_gap_us must be the second
    launch's release, but the measured gap is when it started: in gemm_first rows the streaming
    kernel usually waited for SMs the GEMM held. Both orders release the second kernel through
    the same spin + event, so every row of a shape gets the median gap of that shape's
    stream_first rows (where the GEMM always found free SMs: 11-16 us); the observed gap stays
    in observed_start_gap_us. With `reps` (its --reps-out CSV) the gemm_first rows also get
    their start modes (start_modes)."""
    m = pd.read_csv(measured)
    m["observed_start_gap_us"] = m["start_gap_us"]
    release = m[m["order"] == "stream_first"].groupby("name")["start_gap_us"].median()
    m["start_gap_us"] = m["name"].map(release).round(3)
    cols = list(REQUIRED) + [c for c in MEASURED + ("sm_clock_mhz", "observed_start_gap_us") if c in m.columns]
    m = m[cols]
    if reps is not None:
        m = m.merge(start_modes(pd.read_csv(reps)), on=["name", "stream_kind", "ctas", "order"], how="left")
        m["reps"] = m["reps"].astype("Int64")
        m["reps_beside"] = m["reps_beside"].astype("Int64")
    m.to_csv(out, index=False)
    return len(m)


def run(cfg: DictConfig, out_dir: Path) -> pd.DataFrame:
    df = load_input(cfg.validate.input)
    return simulate_rows(df, OmegaConf.to_container(cfg.gpu, resolve=True))


if __name__ == "__main__":  # rebuild the default input from the measured CSVs
    measured = REPO_ROOT / "harness" / "data" / "measured"
    n = write_input(measured / "h100_concurrent.csv", DEFAULT_INPUT, measured / "h100_concurrent_reps.csv")
    print(f"{n} rows -> {DEFAULT_INPUT}")
