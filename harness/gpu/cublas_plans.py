"""cuBLAS's GEMM plans as recorded on an H100: which nvjet kernel and grid cuBLAS launched for a
shape, parsed from the partition probe (harness/data/measured/h100_partitions_kernels.csv) into
harness/data/measured/h100_cublas_plans.csv, and the GemmConfig that replays each plan.

    python -m harness.gpu.cublas_plans     # regenerate h100_cublas_plans.csv from the probe
"""
from __future__ import annotations

import csv
import math
import re
from functools import lru_cache
from pathlib import Path

from harness.gpu.kernels import TK, GemmConfig

MEASURED_DIR = Path(__file__).resolve().parents[1] / "data" / "measured"
CUBLAS_PROBE_CSV = MEASURED_DIR / "h100_partitions_kernels.csv"
CUBLAS_PLANS_CSV = MEASURED_DIR / "h100_cublas_plans.csv"
_NVJET = re.compile(r"nvjet_sm90_tst_(\d+)x(\d+)_(\d+)x(\d+)_(\d+)x(\d+)_([hv])_bz(?:_coop([AB]))?(_splitK)?_")
PLAN_COLUMNS = ["name", "M", "N", "K", "kernel", "grid_ctas", "tile_m", "tile_n", "k_step", "stages", "cluster_m",
                "cluster_n", "raster", "coop", "splitk", "tiles", "schedule", "partitions"]


def parse_nvjet(kernel: str) -> dict | None:
    """Fields of a cuBLAS nvjet kernel name, e.g. nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT:
    tile 256x128, K step 64 x 4 pipeline stages, 1x2 cluster, raster h(orizontal)/v, cooperative
    A/B (two consumer warpgroups share the tile), splitK (a cublasLt splitKreduce kernel follows).
    None for other kernels."""
    m = _NVJET.search(kernel)
    if not m:
        return None
    return dict(tile_m=int(m.group(1)), tile_n=int(m.group(2)), k_step=int(m.group(3)), stages=int(m.group(4)),
                cluster_m=int(m.group(5)), cluster_n=int(m.group(6)), raster=m.group(7), coop=m.group(8) or "",
                splitk=bool(m.group(9)))


def plan_schedule(tiles: int, grid_ctas: int, splitk: bool) -> str:
    """The builder schedule of a recorded launch: 'streamk' with a reduction kernel for cuBLAS's
    splitK kernels, 'dp' when there are no more tiles than CTAs (one tile per CTA), else 'streamk'
    (whole rounds of tiles data-parallel, the rest stream-K; none when the grid divides the tiles)."""
    if splitk:
        return "streamk+reduce"
    return "dp" if tiles <= grid_ctas else "streamk"


def derive_cublas_plans(probe_csv: str | Path = CUBLAS_PROBE_CSV) -> list[dict]:
    """One plan row per GEMM shape of the partition probe (scripts/measure/probe_partitions.py):
    the nvjet kernel and grid cuBLAS launched, the name's fields, tile count and schedule, and the
    partitions in which that same kernel and grid were recorded (all of them: cuBLAS plans for the
    whole device). Raises if a shape's kernel or grid differs between partitions."""
    rows: dict[tuple, dict] = {}
    with open(probe_csv, newline="") as f:
        for r in csv.DictReader(f):
            nv = parse_nvjet(r["kernel"])
            if nv is None:
                continue
            M, N, K = int(r["M"]), int(r["N"]), int(r["K"])
            grid = math.prod(int(x) for x in r["grid"].strip("[]").split(","))
            key = (r["name"], M, N, K)
            if key in rows:
                if (rows[key]["kernel"], rows[key]["grid_ctas"]) != (r["kernel"], grid):
                    raise ValueError(f"{key}: {r['partition']} launched {r['kernel']} {grid}, "
                                     f"others {rows[key]['kernel']} {rows[key]['grid_ctas']}")
                rows[key]["partitions"] += " " + r["partition"]
                continue
            tiles = math.ceil(M / nv["tile_m"]) * math.ceil(N / nv["tile_n"])
            rows[key] = dict(name=r["name"], M=M, N=N, K=K, kernel=r["kernel"], grid_ctas=grid, **nv, tiles=tiles,
                             schedule=plan_schedule(tiles, grid, nv["splitk"]), partitions=r["partition"])
    return list(rows.values())


def write_cublas_plans(out: str | Path = CUBLAS_PLANS_CSV, probe_csv: str | Path = CUBLAS_PROBE_CSV) -> int:
    """Regenerate the plan table (python -m harness.gpu.cublas_plans writes h100_cublas_plans.csv)."""
    rows = derive_cublas_plans(probe_csv)
    with open(out, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=PLAN_COLUMNS, lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    return len(rows)


def plan_config(plan: dict) -> GemmConfig | None:
    """The GemmConfig of a plan row (or of parse_nvjet fields + grid_ctas + tiles). 2-CTA TMA
    multicast stands for every cluster shape (see _tile_rows); the cluster's CTA count goes to
    the kernels (cluster residency, gpu.max_clusters_4)."""
    if int(plan["k_step"]) != TK:
        return None
    tm, tn, stages, grid = int(plan["tile_m"]), int(plan["tile_n"]), int(plan["stages"]), int(plan["grid_ctas"])
    ctas = int(plan["cluster_m"]) * int(plan["cluster_n"])
    cluster = min(2, ctas)
    splitk = str(plan["splitk"]) in ("True", "true", "1")
    schedule = plan_schedule(int(plan["tiles"]), grid, splitk)
    if schedule == "dp":
        return GemmConfig(tm, tn, 1, "dp", stages, cluster, cluster_ctas=ctas)
    return GemmConfig(tm, tn, 1, "streamk", stages, cluster, grid=grid,
                      fixup="reduce" if schedule == "streamk+reduce" else "inline", cluster_ctas=ctas)


def plan_from_cublas_kernel(kernel: str, grid_ctas: int, M: int, N: int, K: int) -> GemmConfig | None:
    """The GemmConfig of a cuBLAS nvjet kernel launched with `grid_ctas` CTAs for an M x N x K
    GEMM; None for kernels this builder cannot express."""
    nv = parse_nvjet(kernel)
    if nv is None:
        return None
    tiles = math.ceil(M / nv["tile_m"]) * math.ceil(N / nv["tile_n"])
    return plan_config(dict(nv, grid_ctas=grid_ctas, tiles=tiles))


@lru_cache(maxsize=4)
def recorded_cublas_plans(path: str = str(CUBLAS_PLANS_CSV)) -> dict:
    """{(name, M, N, K): plan row} of harness/data/measured/h100_cublas_plans.csv."""
    p = Path(path)
    if not p.is_file():
        return {}
    with open(p, newline="") as f:
        return {(r["name"], int(r["M"]), int(r["N"]), int(r["K"])): r for r in csv.DictReader(f)}


def recorded_cublas_plan(name: str, M: int, N: int, K: int) -> tuple[GemmConfig, str] | None:
    """(config, kernel name) of the recorded cuBLAS launch for this shape, if there is one."""
    rec = recorded_cublas_plans().get((name, M, N, K))
    if rec is None:
        return None
    cfg = plan_config(rec)
    return (cfg, rec["kernel"]) if cfg else None


if __name__ == "__main__":  # regenerate harness/data/measured/h100_cublas_plans.csv from the probe
    print(f"{write_cublas_plans()} plans -> {CUBLAS_PLANS_CSV}")
