"""validate_collectives: simulate NCCL-like collectives and put them beside measured ones.

Reads ``validate.input`` (CSV: name,op,bytes,gpus,algo[,system,channels,measured_us,busbw_GBps,...];
``channels`` overrides collective.channels for that row, as NCCL_MIN/MAX_NCHANNELS did;
default: harness/data/validation/collectives.csv), simulates every row with the GPU model
``collective`` on the system named by the row (column ``system``, else 2 -> hgx_h200_2gpu,
4 -> hgx_h200_4gpu, 8 -> dgx_h100) through the NVSwitch router (NVLS rows with the ``nvls``
switch feature), and returns the rows with ``sim_us`` and ``busbw_GBps`` (nccl-tests formulas:
algbw = bytes / time; busbw = algbw x 2(n-1)/n for all_reduce, x (n-1)/n otherwise). Measured
columns of the input are kept with a ``measured_`` prefix (``measured_busbw_GBps``) and the
error ``busbw_err_pct`` = 100 (sim - measured) / measured is added where they exist.

bytes follow nccl-tests: per rank for all_reduce, the total over ranks for all_gather and
reduce_scatter.
"""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pandas as pd
from omegaconf import DictConfig, OmegaConf

from harness import REPO_ROOT
from harness import topology as topo_mod
from harness.cosim import simulate
from harness.cosim.rows import map_rows
from harness.config.schema import SystemConfig
from harness.errors import ConfigError
from harness.experiments import _input_csv as input_csv
from harness.results import write_csv_atomic
from harness.system import cosim_options, engine_params

DEFAULT_INPUT = REPO_ROOT / "harness" / "data" / "validation" / "collectives.csv"
SYSTEM_BY_GPUS = {2: "hgx_h200_2gpu", 4: "hgx_h200_4gpu", 8: "dgx_h100"}
OPS = ("all_reduce", "all_gather", "reduce_scatter")
ALGOS = ("ring", "nvls")
# Each row names its collective, size and system; no layer workload, scheme or traffic is involved.
IGNORED_KEYS = ("model", "phase", "workload", "scheme", "traffic", "validate.gemm")


def ignored_keys(cfg: DictConfig) -> tuple[tuple[str, ...], str]:
    """The ISA NVLS kernel's flags after a multicast store mean "delivered", so its rows always
    run with member acks (isa_workload): net.nvls.member_acks is not the user's to choose there."""
    if str(cfg.validate.get("kernels", "model")) == "isa":
        return IGNORED_KEYS + ("net.nvls.member_acks",), \
            "with validate.kernels=isa (the NVLS kernel needs delivered multicast stores: always true)"
    return IGNORED_KEYS, ""


def bus_factor(op: str, n: int) -> float:
    return 2.0 * (n - 1) / n if op == "all_reduce" else (n - 1) / n


def load_system(name: str) -> DictConfig:
    """conf/system/<name>.yaml with its defaults chain: its system.* and gpu.* keys."""
    path = REPO_ROOT / "conf" / "system" / f"{name}.yaml"
    if not path.is_file():
        raise ConfigError("validate.input", f"system '{name}' has no conf/system/{name}.yaml")
    raw = OmegaConf.load(path)
    merged = OmegaConf.create({})
    for parent in raw.get("defaults", []) or []:
        if isinstance(parent, str) and parent != "_self_":
            merged = OmegaConf.merge(merged, load_system(parent))
    return OmegaConf.merge(merged, OmegaConf.create({"system": raw.get("system", {}), "gpu": raw.get("gpu", {})}))


def system_overrides(cfg: DictConfig) -> dict[str, Any]:
    """The system.* values this run sets itself (command line, experiment config): the keys where
    cfg.system differs from its own system file over the schema defaults. Each row's system
    replaces the composed one, and these are applied on top, so that an override such as
    system.lane_bw_gbps=26.5625 reaches every row instead of being silently replaced."""
    name = str(cfg.system.name)
    if not (REPO_ROOT / "conf" / "system" / f"{name}.yaml").is_file():
        raise ConfigError("system.name", f"'{name}' has no conf/system/{name}.yaml to compare overrides against")
    own = OmegaConf.merge(OmegaConf.structured(SystemConfig), load_system(name).system)
    own_d, cur = OmegaConf.to_container(own), OmegaConf.to_container(cfg.system)
    return {k: v for k, v in cur.items() if k not in ("name", "gpus") and own_d.get(k) != v}


def row_system(cfg: DictConfig, row: pd.Series) -> DictConfig:
    gpus = int(row["gpus"])
    name = row.get("system") if "system" in row and isinstance(row.get("system"), str) else SYSTEM_BY_GPUS.get(gpus)
    if name is None:
        raise ConfigError("validate.input", f"no system for {gpus} GPUs (add a 'system' column)")
    sys_cfg = OmegaConf.merge(OmegaConf.structured(OmegaConf.to_container(cfg.system)), load_system(name).system,
                              system_overrides(cfg))
    sys_cfg.gpus = gpus
    return sys_cfg


def row_gpu(cfg: DictConfig, system_name: str) -> DictConfig:
    """cfg with the gpu.* keys of the row's system file (an H200 row runs H200s whatever system the
    run composed), except where this run set a key itself: a value that differs from what the
    composed system file (or the default) gives was set on the command line or by the experiment."""
    from harness.params import gpu as gpu_params

    defaults = {k.split(".", 1)[1]: v for k, v in gpu_params.defaults().items()}
    own_file = OmegaConf.to_container(load_system(str(cfg.system.name)).gpu)
    row = OmegaConf.to_container(load_system(system_name).gpu)
    own, current = {**defaults, **own_file}, OmegaConf.to_container(cfg.gpu)
    take = {k: row.get(k, defaults.get(k)) for k in {*own_file, *row} if current.get(k) == own.get(k)}
    return OmegaConf.merge(cfg, {"gpu": take}) if take else cfg


def row_params(cfg: DictConfig, row: pd.Series) -> dict[str, Any]:
    op, algo = str(row["op"]), str(row["algo"])
    if op not in OPS:
        raise ConfigError("validate.input", f"op '{op}' is not one of: {', '.join(OPS)}")
    if algo not in ALGOS:
        raise ConfigError("validate.input", f"algo '{algo}' is not one of: {', '.join(ALGOS)}")
    # a collective alone keeps the GPUs' power low: a power-aware clock is the memory-bound one
    # (an H100 runs a streaming kernel alone at 1980 MHz, docs/VALIDATION.md "GEMM beside a
    # streaming kernel"); it matters to the ISA kernels, whose stores leave at the SMs' clock
    params = engine_params(cfg, kind="memory")
    params["host.gpu_model"] = "collective"
    params["host.switch_model"] = cfg.system.switch_model
    params["collective.op"] = op
    params["collective.algo"] = algo
    params["collective.bytes"] = int(row["bytes"])
    if "channels" in row and pd.notna(row["channels"]):  # a row may force NCCL's channel count
        channels = int(row["channels"])
        if channels < 1:
            raise ConfigError("validate.input", f"row {row['name']}: channels must be >= 1, got {channels}")
        params["collective.channels" if algo == "ring" else "collective.nvls_channels"] = channels
    if algo == "nvls":
        feats = [f for f in str(params.get("net.features", "")).split(",") if f]
        if "nvls" not in feats:
            feats.insert(0, "nvls")
        params["net.features"] = ",".join(feats)
    return params


def isa_bytes(nbytes: int, channels: int, gpus: int) -> int:
    """The size the ISA kernels move: they split the tensor into equal 128 B-aligned parts per
    channel and GPU, so round up (at most channels x GPUs x 128 B more, 0.2 % of 1 MiB at 24 x 2)."""
    unit = channels * gpus * 128
    return -(-nbytes // unit) * unit


def isa_workload(cfg: DictConfig, row: pd.Series, params: dict[str, Any]) -> bytes:
    """The row's collective as the library's tile-ISA kernel (one launch on every GPU)."""
    from harness.kernels import nvls, ring
    from harness.kernels.builder import WorkloadBuilder
    gpus, op, algo, nbytes = int(row["gpus"]), str(row["op"]), str(row["algo"]), int(row["bytes"])
    functional = bool(cfg.net.functional)
    b = WorkloadBuilder(str(row["name"]), gpus, int(cfg.gpu.num_sms), functional=functional)
    channels = int(params["collective.nvls_channels" if algo == "nvls" else "collective.channels"])
    nbytes = isa_bytes(nbytes, channels, gpus)
    # a functional run's input starts at rank + 1 on every GPU (no kernel writes it first)
    if algo == "nvls":
        mc = b.buffer("data", nbytes, multicast=True, init_rank=functional)
        shard = b.buffer("shard", nbytes // gpus)
        ki = nvls.collective(b, "collective", op, nbytes, tensor=mc, shard=shard, cfg=nvls.NvlsConfig(channels=channels))
        # its flags after a multicast store say "delivered": the store completes when every
        # member holds it, as in the NVLS schemes (conf/scheme/tp_nvls.yaml)
        params["net.nvls.member_acks"] = True
    else:
        data = b.buffer("data", nbytes, init_rank=functional)
        ki = ring.collective(b, "collective", op, nbytes, data=data, cfg=ring.RingConfig(channels=channels))
    b.launch(ki, b.stream("main"))
    params["host.gpu_model"] = "hopper"
    return b.wl.SerializeToString()


def isa_span_us(st: pd.DataFrame, gpus: int, key: str, what: str) -> float:
    """The ISA kernel (launch 0, named collective) from the first GPU's start to the last GPU's
    end, us (every GPU starts it at the same host launch); a GPU without its end is an error
    naming `key`."""
    ends = st[st["name"].str.fullmatch(r"gpu\d+\.kernel0\.collective\.end")]["value"]
    starts = st[st["name"].str.fullmatch(r"gpu\d+\.kernel0\.collective\.start")]["value"]
    if len(ends) != gpus or (ends < 0).any():
        raise ConfigError(key, f"{what}: the collective did not finish on every GPU ({int((ends >= 0).sum())} of {gpus})")
    return (float(ends.max()) - float(starts.min())) / 1e3


def finish_us(cfg: DictConfig, st: pd.DataFrame, row: pd.Series) -> float:
    """When the last GPU finished the collective: the collective model's finish time, or the ISA
    kernel's end (from the first GPU's start: both start at the same host launch)."""
    if cfg.validate.kernels == "isa":
        return isa_span_us(st, int(row["gpus"]), "validate.input", f"row {row['name']}")
    fin = st[st["name"].str.fullmatch(r"gpu\d+\.collective\.finish_time")]["value"]
    if len(fin) != int(row["gpus"]):
        raise ConfigError("validate.input", f"row {row['name']}: expected {row['gpus']} finish times, got {len(fin)}")
    return float(fin.max()) / 1e6


def simulate_row(cfg: DictConfig, row: pd.Series, stats_dir: Path | None = None) -> dict[str, Any]:
    system = row_system(cfg, row)
    cfg = row_gpu(cfg, str(system.name))
    topo = topo_mod.build(system)
    params = row_params(cfg, row)
    opts = cosim_options(cfg)
    workload = isa_workload(cfg, row, params) if cfg.validate.kernels == "isa" else b""
    res = simulate(topo, params, seed=int(cfg.seed), workload=workload, **opts)
    st = res.stats
    if stats_dir is not None:  # every statistic and link time series of this row
        write_csv_atomic(stats_dir / "stats.csv", st)
        write_csv_atomic(stats_dir / "series.csv", res.series)
    sim_us = finish_us(cfg, st, row)
    moved = {}
    if cfg.validate.kernels == "isa":  # payload bytes all GPUs sent, per packet type
        for t in ("WRITE", "READ_RESP", "MM_ST"):
            moved[f"bytes_{t.lower()}"] = int(st[st["name"].str.fullmatch(rf"gpu\d+\.tx\.{t}\.bytes")]["value"].sum())
    n = int(row["gpus"])
    algbw = float(row["bytes"]) / (sim_us * 1e3)
    errs = st[st["name"].str.fullmatch(r"gpu\d+\.collective\.functional_errors")]["value"].sum()
    return {"sim_us": sim_us, "algbw_GBps": algbw, "busbw_GBps": algbw * bus_factor(str(row["op"]), n),
            "system": system.name, "sim_wall_s": res.wall_s, "functional_errors": int(errs), **moved}


def load_input(value) -> pd.DataFrame:
    """validate.input's rows, every one checked before anything is simulated."""
    path = input_csv.resolve(value, DEFAULT_INPUT)
    df = input_csv.read(path, ["name", "op", "bytes", "gpus", "algo"])
    input_csv.integers(path, df, "bytes", 1)
    input_csv.integers(path, df, "gpus", 2)  # a collective needs a peer
    if "channels" in df.columns:
        input_csv.integers(path, df, "channels", 1, optional=True)
    input_csv.choices(path, df, "op", OPS)
    input_csv.choices(path, df, "algo", ALGOS)
    return df


def run(cfg: DictConfig, out_dir: Path) -> pd.DataFrame:
    if cfg.validate.kernels not in ("model", "isa"):
        raise ConfigError("validate.kernels", f"'{cfg.validate.kernels}' is not one of: model, isa")
    df = load_input(cfg.validate.input)
    measured = [c for c in ("measured_us", "algbw_GBps", "busbw_GBps") if c in df.columns]
    df = df.rename(columns={c: (c if c.startswith("measured_") else f"measured_{c}") for c in measured})
    if "system" in df.columns:
        df = df.rename(columns={"system": "system_in"})
    jobs = int(os.environ.get("CAIS_VALIDATE_JOBS", "1"))

    keep_stats = bool(cfg.validate.get("stats", False))

    def one(row):
        if "system_in" in row and isinstance(row["system_in"], str):
            row = row.copy()
            row["system"] = row["system_in"]
        return simulate_row(cfg, row, out_dir / "rows" / str(row["name"]) if keep_stats else None)

    results = map_rows(one, [row for _, row in df.iterrows()], jobs, label="rows")
    out = pd.concat([df.reset_index(drop=True), pd.DataFrame(results)], axis=1)
    if "system_in" in out.columns:
        out = out.drop(columns=["system_in"])
    if "measured_busbw_GBps" in out.columns:
        out["busbw_err_pct"] = 100.0 * (out["busbw_GBps"] - out["measured_busbw_GBps"]) / out["measured_busbw_GBps"]
    return out


# ---------------------------------------------------------------- the default validation set
PUBLIC_NVLS = [  # 8 x H100 NVLS all_reduce, large messages (busbw, GB/s) and where it is stated
    (480.0, "nccl-tests issue #212 (NCCL maintainer): 8xH100 NVLS all_reduce peak busbw ~480 GB/s, NCCL >= 2.17"),
]
PUBLIC_RING_H100 = (368.76, "nccl-tests issue #309: 8xH100 HGX ring all_reduce, large messages, measured by a user")


def build_default_input(min_bytes: int = 64 * 2**20) -> pd.DataFrame:
    """The validation set: measured H200 ring rows >= min_bytes, NVLS 1-16 GiB on 8 x H100
    (public figure), one 8 x H100 ring row (public figure). Written to DEFAULT_INPUT by
    ``python -m harness.experiments.validate_collectives --write-input``."""
    rows = []
    for n in (2, 4):
        m = pd.read_csv(REPO_ROOT / "harness" / "data" / "measured" / f"h200x{n}_nccl.csv")
        m = m[m["bytes"] >= min_bytes]
        for _, r in m.iterrows():
            rows.append({"name": f"h200x{n}.{r['name']}", "op": r["op"], "bytes": int(r["bytes"]), "gpus": n,
                         "algo": r["algo"], "system": f"hgx_h200_{n}gpu", "measured_us": r["measured_us"],
                         "busbw_GBps": r["busbw_GBps"],
                         "source": f"harness/data/measured/h200x{n}_nccl.csv (NCCL {r['nccl_version']})"})
    busbw, src = PUBLIC_NVLS[0]
    for gib in (1, 2, 4, 8, 16):
        b = gib * 2**30
        rows.append({"name": f"h100x8.all_reduce_nvls.{gib}GiB", "op": "all_reduce", "bytes": b, "gpus": 8, "algo": "nvls",
                     "system": "dgx_h100", "measured_us": b / (busbw / 1.75) / 1e3, "busbw_GBps": busbw, "source": src})
    busbw, src = PUBLIC_RING_H100
    b = 4 * 2**30
    rows.append({"name": "h100x8.all_reduce_ring.4GiB", "op": "all_reduce", "bytes": b, "gpus": 8, "algo": "ring",
                 "system": "dgx_h100", "measured_us": b / (busbw / 1.75) / 1e3, "busbw_GBps": busbw, "source": src})
    return pd.DataFrame(rows)


FIT_BYTES = 256 * 2**20  # the calibration subset: every measured ring row of this size


def fit_cta_bw(candidates: list[float], overrides: list[str] | None = None, jobs: int = 2) -> pd.DataFrame:
    """Fit collective.cta_bw_gbps once: simulate the measured ring rows of FIT_BYTES (both GPU
    counts, all three ops) for each candidate and return mean |busbw error| per candidate. The
    other rows of the validation set are never used for the fit."""
    from hydra import compose as hydra_compose, initialize_config_dir

    from harness import CONF_DIR
    from harness.config.schema import register

    df = build_default_input()
    df = df[(df["algo"] == "ring") & (df["bytes"] == FIT_BYTES) & df["name"].str.startswith("h200")]
    out = []
    register()
    for c in candidates:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            cfg = hydra_compose(config_name="config", overrides=["experiment=validate_collectives",
                                                                 f"collective.cta_bw_gbps={c}", *(overrides or [])])
        with ThreadPoolExecutor(max_workers=jobs) as ex:
            res = list(ex.map(lambda item: simulate_row(cfg, item[1]), df.iterrows()))
        err = [100 * (r["busbw_GBps"] - m) / m for r, m in zip(res, df["busbw_GBps"])]
        out.append({"cta_bw_gbps": c, "mean_abs_err_pct": sum(map(abs, err)) / len(err),
                    "max_abs_err_pct": max(map(abs, err)), "errors_pct": [round(e, 2) for e in err]})
    return pd.DataFrame(out)


if __name__ == "__main__":
    import sys

    if "--fit" in sys.argv:
        i = sys.argv.index("--fit")
        cands = [float(x) for x in sys.argv[i + 1].split(",")]
        print(fit_cta_bw(cands, sys.argv[i + 2:]).to_string(index=False))
    if "--write-input" in sys.argv:
        DEFAULT_INPUT.parent.mkdir(parents=True, exist_ok=True)
        build_default_input().to_csv(DEFAULT_INPUT, index=False)
        print(DEFAULT_INPUT)
