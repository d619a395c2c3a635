"""validate_overlap: a row-parallel GEMM followed by a ring AllReduce of its output, serial and
overlapped on two streams, on the Hopper and NVSwitch engines beside measured H200s.

Reads ``validate.input`` (CSV: name,M,N,K,gpus,chunks and optionally the measured gemm_us,
allreduce_us, serial_us, overlap_us; default harness/data/validation/overlap_h200.csv, made from
harness/data/measured/h200x{2,4,8}_gemm_allreduce.csv). Each row runs on hgx_h200_{gpus}gpu with
every GPU executing tile-ISA kernels from the library, as scripts/measure/measure_overlap.py ran
PyTorch + NCCL (NCCL_ALGO=Ring, no NVLS):

  serial    Y = X W^T (the library GEMM, M x N x K) then NCCL's ring AllReduce of Y
            (harness.kernels.ring, `collective.channels` CTAs, as validate_collectives' isa kernels) on one stream;
  overlap   `chunks` GEMMs of M/chunks rows on a compute stream and the AllReduce of chunk i on
            a second stream, launched after GEMM chunk i (PyTorch's async_op all_reduce on the
            NCCL stream: it waits for chunk i's event, and for the AllReduce of chunk i-1 by
            stream order). Not CoCoNet's fused flags: each chunk is a kernel of its own.

Times are per GPU from the first launch's release to the last kernel's end (CUDA events around
the work, which include the launch latency), the maximum over the GPUs, as the measurement kept
the maximum over ranks: sim_serial_us, sim_overlap_us; sim_gemm_us and sim_allreduce_us are the
two kernels of the serial run, each from its release to its end. err_<x>_pct = 100 (sim -
measured) / measured where measured.

The ring kernel needs a size that splits into channels x GPUs whole parts; NCCL splits unevenly.
Each AllReduce therefore covers its chunk rounded up to a multiple of channels x GPUs x 128 B
(ar_bytes, at most 0.03 % more for every measured shape).
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from omegaconf import DictConfig, OmegaConf

from harness import REPO_ROOT
from harness import topology as topo_mod
from harness.cosim import simulate
from harness.cosim.rows import map_rows
from harness.errors import ConfigError
from harness.experiments import _input_csv as input_csv
from harness.experiments.validate_collectives import row_system
from harness.kernels import gemm as gemm_kernel
from harness.kernels import ring
from harness.kernels.builder import WorkloadBuilder
from harness.system import cosim_options, engine_params, run_system
from harness.workload.models import ELEM_BYTES as ELEM

DEFAULT_INPUT = REPO_ROOT / "harness" / "data" / "validation" / "overlap_h200.csv"
MEASURED_CSVS = tuple(REPO_ROOT / "harness" / "data" / "measured" / f"h200x{n}_gemm_allreduce.csv" for n in (2, 4, 8))
REQUIRED = ["name", "M", "N", "K", "gpus", "chunks"]
MEASURED = ("gemm_us", "allreduce_us", "serial_us", "overlap_us")
SYSTEM_BY_GPUS = {2: "hgx_h200_2gpu", 4: "hgx_h200_4gpu", 8: "hgx_h200_8gpu"}
PART_ALIGN = 128  # bytes: one NVLink packet / L2 line, so every ring part starts on a line
# Each row names its own shape and system; no layer workload, scheme or traffic is involved.
IGNORED_KEYS = ("model", "phase", "workload", "scheme", "traffic", "validate.stats", "validate.kernels",
                "validate.gemm")


def ar_bytes(rows: int, N: int, gpus: int, channels: int) -> int:
    """The AllReduce size of `rows` x N bf16, rounded up to whole 128 B parts per channel and GPU."""
    unit = channels * gpus * PART_ALIGN
    return -(-rows * N * ELEM // unit) * unit


def load_input(value) -> pd.DataFrame:
    """validate.input's rows, every one checked before anything is simulated."""
    path = input_csv.resolve(value, DEFAULT_INPUT)
    df = input_csv.read(path, REQUIRED)
    for c in ("M", "N", "K", "chunks"):
        input_csv.integers(path, df, c, 1)
    input_csv.integers(path, df, "gpus", 2)
    for i, row in df.iterrows():
        where = input_csv.where(path, df, i)
        if int(row["gpus"]) not in SYSTEM_BY_GPUS:
            raise ConfigError(input_csv.KEY, f"{where}: gpus '{row['gpus']}' is not allowed; allowed: "
                              f"{', '.join(map(str, SYSTEM_BY_GPUS))} (the hgx_h200 systems)")
        if int(row["M"]) % int(row["chunks"]):
            raise ConfigError(input_csv.KEY, f"{where}: M {row['M']} does not split into chunks {row['chunks']}; "
                              "allowed: chunks dividing M")
        for c in MEASURED:
            if c in df.columns and pd.notna(row[c]) and not pd.to_numeric(pd.Series([row[c]]), errors="coerce").iloc[0] > 0:
                raise ConfigError(input_csv.KEY, f"{where}: {c} '{row[c]}' is not allowed; allowed: a time in us > 0 or blank")
    return df.reset_index(drop=True)


def build_workload(row: Any, num_sms: int, ring_cfg: ring.RingConfig, overlap: bool):
    """The tile-ISA workload of one row: serial (one stream) or overlapped (two streams)."""
    M, N, K, G = int(row["M"]), int(row["N"]), int(row["K"]), int(row["gpus"])
    chunks = int(row["chunks"]) if overlap else 1
    rows = M // chunks
    b = WorkloadBuilder(f"{row['name']}.{'overlap' if overlap else 'serial'}{chunks}", G, num_sms)
    w = b.buffer("w", N * K * ELEM)
    comp = b.stream("compute")
    comm = b.stream("nccl") if overlap else comp
    size = ar_bytes(rows, N, G, ring_cfg.channels)
    for i in range(chunks):
        x = b.buffer(f"x{i}", rows * K * ELEM)
        y = b.buffer(f"y{i}", size)
        gk, _ = gemm_kernel.gemm(b, f"gemm{i}", rows, N, K, a=x, w=w, out=y)
        g = b.launch(gk, comp)
        ak = ring.collective(b, f"allreduce{i}", "all_reduce", size, data=y, cfg=ring_cfg)
        b.launch(ak, comm, after=(g,))
    return b.wl


def _spans(stats: pd.DataFrame, wl, gpus: int) -> np.ndarray:
    """(release, end) in us of every launch on every GPU: array [gpu, launch, 2]."""
    s = dict(zip(stats["name"], stats["value"]))
    out = np.zeros((gpus, len(wl.launches), 2))
    for g in range(gpus):
        for i, la in enumerate(wl.launches):
            key = f"gpu{g}.kernel{i}.{wl.kernels[la.kernel].name}"
            if key + ".end" not in s or s[key + ".end"] < 0:
                raise ConfigError("validate.input", f"{wl.name}: launch {i} did not finish on GPU {g}")
            out[g, i] = (s[key + ".release"] / 1e3, s[key + ".end"] / 1e3)
    return out


def _run(cfg: DictConfig, row: pd.Series, wl) -> tuple[np.ndarray, float]:
    row = row.copy()
    row["system"] = SYSTEM_BY_GPUS[int(row["gpus"])]
    system = row_system(cfg, row)
    # Each measured pattern ran a few milliseconds at a time from an idle GPU: the SMs ran at the
    # burst clock while the GEMM ran and at the memory-bound one while NCCL ran alone
    params = engine_params(cfg, burst=True)
    params["host.gpu_model"] = "hopper"
    params["host.switch_model"] = cfg.system.switch_model
    res = simulate(topo_mod.build(system), params, seed=int(cfg.seed), workload=wl.SerializeToString(),
                   **cosim_options(cfg))
    return _spans(res.stats, wl, int(row["gpus"])), res.wall_s


def _ring_cfg(cfg: DictConfig) -> ring.RingConfig:
    return ring.RingConfig(channels=int(cfg.collective.channels))


def ring_alone(cfg: DictConfig, nbytes: int) -> tuple[float, dict[str, float], pd.DataFrame]:
    """A ring all_reduce of `nbytes` per GPU alone on cfg's system, with cfg's settings (this
    experiment's: the flit-level switch, its channels) at the clock of a memory-bound kernel: the
    per-GPU data rate in GB/s (the 2 (G-1)/G of the tensor a GPU sends, over the last GPU's end),
    the run's statistics by name and its time series (scripts/ring_switch_stats.py, a test)."""
    g = int(cfg.system.gpus)
    b = WorkloadBuilder("ar", g, int(cfg.gpu.num_sms))
    b.launch(ring.collective(b, "ar", "all_reduce", nbytes, data=b.buffer("y", nbytes), cfg=_ring_cfg(cfg)),
             b.stream("s"))
    r = run_system(cfg, workload=b.wl.SerializeToString(), kind="memory")
    s = dict(zip(r.stats["name"], r.stats["value"]))
    end_ns = max(s[f"gpu{i}.kernel0.ar.end"] for i in range(g))
    return 2 * (g - 1) / g * nbytes / end_ns, s, r.series


def _span(a: np.ndarray) -> float:
    """Per GPU from its first release to its last end; the slowest GPU (the measurement's max over ranks)."""
    return float(np.max(a[:, :, 1].max(axis=1) - a[:, :, 0].min(axis=1)))


def simulate_serial(cfg: DictConfig, row: pd.Series) -> dict[str, Any]:
    """GEMM then AllReduce on one stream: the GEMM, the AllReduce and the whole, in us."""
    rc = _ring_cfg(cfg)
    spans, wall = _run(cfg, row, build_workload(row, int(cfg.gpu.num_sms), rc, overlap=False))
    return {"system": SYSTEM_BY_GPUS[int(row["gpus"])],
            "ar_bytes": ar_bytes(int(row["M"]), int(row["N"]), int(row["gpus"]), rc.channels),
            "sim_gemm_us": round(float(np.max(spans[:, 0, 1] - spans[:, 0, 0])), 3),
            "sim_allreduce_us": round(float(np.max(spans[:, 1, 1] - spans[:, 1, 0])), 3),
            "sim_serial_us": round(_span(spans), 3), "serial_wall_s": wall}


def simulate_overlap(cfg: DictConfig, row: pd.Series) -> dict[str, Any]:
    spans, wall = _run(cfg, row, build_workload(row, int(cfg.gpu.num_sms), _ring_cfg(cfg), overlap=True))
    return {"sim_overlap_us": round(_span(spans), 3), "overlap_wall_s": wall}


SHAPE = ["name", "M", "N", "K", "gpus"]


def run(cfg: DictConfig, out_dir: Path) -> pd.DataFrame:
    df = load_input(cfg.validate.input)
    if int(cfg.collective.channels) < 1:
        raise ConfigError("collective.channels", f"must be >= 1, got {cfg.collective.channels}")
    jobs = int(os.environ.get("CAIS_VALIDATE_JOBS", "1"))
    shapes = df.drop_duplicates(SHAPE).reset_index(drop=True)  # one serial run per shape, whatever its chunks
    tasks = [("serial", r) for _, r in shapes.iterrows()] + [("overlap", r) for _, r in df.iterrows()]
    fns = {"serial": simulate_serial, "overlap": simulate_overlap}
    results = map_rows(lambda t: fns[t[0]](cfg, t[1]), tasks, jobs, label="simulations")
    serial = pd.concat([shapes[SHAPE], pd.DataFrame(results[:len(shapes)])], axis=1)
    out = df.merge(serial, on=SHAPE, how="left", sort=False)
    out = pd.concat([out, pd.DataFrame(results[len(shapes):])], axis=1)
    for m in MEASURED:
        if m in out.columns:
            meas = pd.to_numeric(out[m], errors="coerce")
            out[f"err_{m[:-3]}_pct"] = np.round(100.0 * (out[f"sim_{m}"] - meas) / meas, 2)
    return out


def write_input(out: Path = DEFAULT_INPUT) -> int:
    """The validation input: every row of the measured CSVs (2, 4 and 8 x H200)."""
    df = pd.concat([pd.read_csv(p) for p in MEASURED_CSVS], ignore_index=True)
    df[REQUIRED + list(MEASURED)].to_csv(out, index=False)
    return len(df)


if __name__ == "__main__":  # rebuild the default input from the measured CSVs
    print(f"{write_input()} rows -> {DEFAULT_INPUT}")
