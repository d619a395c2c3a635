"""validate_kernels: simulate single-GPU kernels and put them beside measured ones.

Reads ``validate.input`` (CSV: name,kind,M,N,K,num_sms[,measured_us,...]; default: the measured
H100 kernels of harness/data/measured/h100_kernels.csv), builds each kernel with
harness.gpu.kernels (gemm) or harness.gpu.norm_attention (layernorm, attention), runs it on the
GPU engine's standalone main with ``gpu.num_sms`` = the row's num_sms, ``gpu.clock_mhz`` = the clock the power model predicts
for the row's SMs and load (tensor for gemm and attention, memory for layernorm; never the row's
measured clock: a user has none for a new case) unless ``gpu.clock_mhz`` > 0 fixes one (column
``sim_clock_mhz``), ``gpu.max_clusters_4`` = the cluster capacity
measured for a partition of that size (h100_partitions_clusters.csv: the whole GPU, or the
driver-made partitions the kernels were measured in) where there is one, and the resolved
``gpu.*`` parameters, and returns the
rows with ``sim_us`` (and ``err_pct`` = 100 (sim - measured) / measured where measured).
Host launch skew is set to 0: one GPU, timed from its own launch. ``validate.gemm=library`` builds
each GEMM as the schemes do instead (harness/kernels/gemm.py: data-parallel tiles of the planned
shape, edge tiles clipped, no split-K or stream-K), so the kernels the figures run are measured too.
"""
from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from omegaconf import DictConfig, OmegaConf

from harness import REPO_ROOT
from harness.errors import ConfigError
from harness.experiments import _input_csv as input_csv
from harness.gpu import cublas_plans, kernels, norm_attention, power, standalone
from harness.kernels import gemm as library_gemm
from harness.kernels.builder import WorkloadBuilder

DEFAULT_INPUT = REPO_ROOT / "harness" / "data" / "measured" / "h100_kernels.csv"
SUPPORTED = ("gemm", "layernorm", "attention")
LOAD = {"gemm": "tensor", "attention": "tensor", "layernorm": "memory"}  # power-model load kind
DEVICE_SMS = 132  # SMs of the measured device (H100 SXM5); library heuristics plan for these
CLUSTERS_CSV = REPO_ROOT / "harness" / "data" / "measured" / "h100_partitions_clusters.csv"
# Each row is one GPU's kernels from the row's shape: no layer workload, scheme or traffic.
IGNORED_KEYS = ("model", "phase", "workload", "scheme", "traffic", "validate.stats", "validate.kernels")
GEMM_BUILDERS = ("cublas", "library")


@functools.lru_cache(maxsize=None)
def _cluster_table(path: Path) -> pd.DataFrame | None:
    return pd.read_csv(path) if path.is_file() else None


def measured_cluster_slots(num_sms: int, path: Path = CLUSTERS_CSV) -> int | None:
    """Resident 4-CTA clusters (cuOccupancyMaxActiveClusters) measured for the whole GPU (132) or
    a driver-made partition of num_sms SMs (how the kernels were measured), or None."""
    c = _cluster_table(path)
    if c is None:
        return None
    api = "primary" if num_sms == DEVICE_SMS else "driver"
    hit = c[(c["num_sms"] == num_sms) & (c["api"] == api) & (c["cluster_size"] == 4)]
    return int(hit["max_active_clusters"].iloc[0]) if len(hit) else None


def library_gemm_workload(name: str, M: int, N: int, K: int, sms: int):
    """The GEMM as a scheme's lowering builds it (local A, B and C on one GPU)."""
    b = WorkloadBuilder(name, 1, sms)
    a, w, c = b.buffer("a", M * K * 2), b.buffer("w", N * K * 2), b.buffer("c", M * N * 2)
    ki, cfg = library_gemm.gemm(b, "gemm", M, N, K, a=a, w=w, out=c, num_sms=sms)
    b.launch(ki, b.stream("main"))
    return b.wl, f"{cfg.tm}x{cfg.tn} data-parallel (library)"


def build(row: Any, params: dict[str, Any], gemm: str = "cublas"):
    kind, M, N, K, sms = row["kind"], int(row["M"]), int(row["N"]), int(row["K"]), int(row["num_sms"])
    if kind == "gemm" and gemm == "library":
        return library_gemm_workload(str(row["name"]), M, N, K, sms)
    if kind == "gemm":
        # cuBLAS launches the same kernel and grid in every SM partition (recorded per shape by
        # scripts/measure/probe_partitions.py, harness/data/measured/h100_cublas_plans.csv):
        # replay that plan; shapes nobody recorded get the analytical heuristic, which plans
        # stream-K grids for the whole device as cuBLAS does and picks by the SMs the kernel has.
        recorded = cublas_plans.recorded_cublas_plan(str(row["name"]), M, N, K)
        if recorded is not None:
            cfg, kernel = recorded
            return kernels.gemm(M, N, K, sms, cfg, name=str(row["name"])), f"{cfg.describe()} ({kernel[15:]})"
        cfg = kernels.choose_gemm(M, N, K, sms, params, device_sms=DEVICE_SMS)
        return kernels.gemm(M, N, K, sms, cfg, name=str(row["name"])), f"{cfg.describe()} (heuristic)"
    if kind == "layernorm":
        return norm_attention.layernorm(M, N, name=str(row["name"])), "1 row/block, 128 threads"
    if kind == "attention":
        return norm_attention.attention(M, N, K, causal=True, name=str(row["name"])), "flash fwd causal"
    raise ConfigError("validate.input", f"kind '{kind}' not supported (supported: {', '.join(SUPPORTED)})")


def simulate_rows(df: pd.DataFrame, gpu_params: dict[str, Any], jobs: int | None = None,
                  gemm: str = "cublas") -> pd.DataFrame:
    """Add sim_us (and config) to rows of name,kind,M,N,K,num_sms; gemm: GEMM_BUILDERS."""
    df = df.copy()
    base = {k if k.startswith("gpu.") else f"gpu.{k}": v for k, v in gpu_params.items()}
    base["gpu.launch_skew_ns"] = 0.0
    base["gpu.clock_spread_frac"] = 0.0  # one GPU: no clock spread between GPUs
    wls, ovs, cfgs = [], [], []
    for _, row in df.iterrows():
        ov = dict(base)
        ov["gpu.num_sms"] = int(row["num_sms"])
        ov = standalone.gpu_params(ov)
        power.check_clocks(ov)
        if float(ov["gpu.clock_mhz"]) == 0:  # power-aware: H100s throttle under the power cap
            ov["gpu.clock_mhz"] = power.settled_clock_mhz(int(row["num_sms"]), LOAD[str(row["kind"])], ov)
        slots = measured_cluster_slots(int(row["num_sms"]))
        if slots is not None:
            ov["gpu.max_clusters_4"] = slots
        wl, desc = build(row, ov, gemm)
        wls.append(wl)
        ovs.append(ov)
        cfgs.append(desc)
    results = standalone.run_many(wls, ovs, jobs=jobs or os.cpu_count() or 2)
    df["sim_us"] = [round(standalone.kernel_time_us(r), 3) for r in results]
    df["sim_clock_mhz"] = [float(ov["gpu.clock_mhz"]) for ov in ovs]
    df["sim_config"] = cfgs
    df["sim_events"] = [int(r.get("engine.events", 0)) for r in results]
    if "measured_us" in df.columns:
        meas = pd.to_numeric(df["measured_us"], errors="coerce")
        df["err_pct"] = np.round(100.0 * (df["sim_us"] - meas) / meas, 2)
    return df


def load_input(path: str | os.PathLike | None) -> pd.DataFrame:
    """validate.input's rows of a supported kind, every one checked before anything is simulated."""
    p = input_csv.resolve(path, DEFAULT_INPUT)
    df = input_csv.read(p, ["name", "kind", "M", "N", "K", "num_sms"])
    for column, least in (("M", 1), ("N", 1), ("K", 0), ("num_sms", 1)):  # K: 0 where a kind has none (layernorm)
        input_csv.integers(p, df, column, least)
    if "measured_us" in df.columns:  # rows whose measurement failed carry no number
        df = df[pd.to_numeric(df["measured_us"], errors="coerce").notna() | df["measured_us"].isna()]
    return df[df["kind"].isin(SUPPORTED)].reset_index(drop=True)


def run(cfg: DictConfig, out_dir: Path) -> pd.DataFrame:
    if cfg.validate.gemm not in GEMM_BUILDERS:
        raise ConfigError("validate.gemm", f"'{cfg.validate.gemm}' is not one of: {', '.join(GEMM_BUILDERS)}")
    df = load_input(cfg.validate.input)
    gpu = OmegaConf.to_container(cfg.gpu, resolve=True)
    return simulate_rows(df, gpu, gemm=str(cfg.validate.gemm))
