"""How the merge unit's first-to-last wait, table high-water mark and the run's time move when
each cross-GPU drift source is scaled alone (docs/DRIFT.md).

Sources (harness/params/gpu.py, measured on one H100): launch_skew -> gpu.launch_skew_ns,
block_jitter -> gpu.block_jitter_frac, tb_order -> gpu.tb_order_window, clock_spread ->
gpu.clock_spread_frac. Each point sets one source to level x its reference (the gpu.* default;
tb_order: drift.order_reference_window) and leaves the others at their defaults; one row per
(source, level, sync, seed), plus a row with every source at zero.

drift.case=ag_gemm runs the ld.cais AG-GEMM of harness/gpu/ag_gemm.py on the configured system
(pre-launch group sync on and off: drift.sync); drift.case=layer runs the configured workload /
scheme / model (e.g. scheme=t3_nvls, whose reductions the merge unit merges) through layer_sim.
Columns: case, source, level, param, value, sync, seed, time_us, then harness/merge_stats.py's.
"""
from __future__ import annotations

import tempfile
from pathlib import Path

import pandas as pd
from omegaconf import DictConfig, OmegaConf

from harness.errors import ConfigError
from harness.gpu import ag_gemm, kernels
from harness.merge_stats import merge_summary
from harness.system import run_system

PARAM = {"launch_skew": "launch_skew_ns", "block_jitter": "block_jitter_frac", "tb_order": "tb_order_window",
         "clock_spread": "clock_spread_frac"}


def check(cfg: DictConfig) -> None:
    d = cfg.drift
    if d.case not in ("ag_gemm", "layer"):
        raise ConfigError("drift.case", f"'{d.case}' is not a case (allowed: ag_gemm, layer)")
    for s in d.sources:
        if s not in PARAM:
            raise ConfigError("drift.sources", f"unknown source '{s}' (allowed: {', '.join(PARAM)})")
    if not d.levels or any(x < 0 for x in d.levels):
        raise ConfigError("drift.levels", f"must be a non-empty list of multiples >= 0, got {list(d.levels)}")
    if d.order_reference_window < 1:
        raise ConfigError("drift.order_reference_window", f"must be >= 1, got {d.order_reference_window}")
    if "cais_merge" not in str(cfg.net.features).split(","):
        raise ConfigError("net.features", f"'{cfg.net.features}' has no cais_merge: there is no wait to measure")
    if d.case == "ag_gemm":
        if cfg.system.gpu_model != "hopper":
            raise ConfigError("system.gpu_model", "drift.case=ag_gemm runs tile-ISA kernels: set system.gpu_model=hopper")
        G = int(cfg.system.gpus)
        if d.m % (G * 128) or d.n % 128 or d.k % kernels.TK or min(d.m, d.n, d.k) <= 0:
            raise ConfigError("drift.m", f"AG-GEMM {d.m}x{d.n}x{d.k} on {G} GPUs: m must be a multiple of {G * 128}, "
                              f"n of 128, k of {kernels.TK}")
        if not 0 <= d.sms <= int(cfg.gpu.num_sms):
            raise ConfigError("drift.sms", f"must be 0..gpu.num_sms={cfg.gpu.num_sms}, got {d.sms}")
    elif cfg.workload == "traffic":
        raise ConfigError("workload", "drift.case=layer needs a layer workload (layer, sublayer_l1..sublayer_l4)")


def points(cfg: DictConfig) -> list[tuple[str, float, str, float]]:
    """(source, level, gpu key, value): every source at zero once, then each source alone."""
    d = cfg.drift
    ref = {s: float(cfg.gpu[PARAM[s]]) for s in PARAM}
    ref["tb_order"] = float(d.order_reference_window)

    def value(s: str, x: float) -> float:
        return max(1, round(x * ref[s])) if s == "tb_order" else x * ref[s]

    out = [("all", 0.0, "", 0.0)]
    for s in d.sources:
        out += [(s, float(x), PARAM[s], value(s, x)) for x in d.levels]
    return out


def _zero_all() -> dict[str, float]:
    return {f"gpu.{p}": (1 if p == "tb_order_window" else 0.0) for p in PARAM.values()}


def _ag_gemm_row(cfg: DictConfig, over: dict, sync: bool) -> tuple[float, pd.DataFrame]:
    d = cfg.drift
    wl = ag_gemm.ag_gemm(int(d.m), int(d.n), int(d.k), int(cfg.system.gpus), mode="cais", sms=int(d.sms) or None)
    for k in wl.kernels:
        k.cais.pre_launch_sync = sync
    res = run_system(cfg, workload=wl.SerializeToString(), overrides=over)
    # The kernels' end, not the last event: merge-entry timers may still fire after it.
    finish = res.stats.loc[res.stats["name"].str.fullmatch(r"gpu\d+\.finish_time"), "value"].max()
    return float(finish) / 1e6, res.stats


def _layer_row(cfg: DictConfig, over: dict) -> tuple[float, pd.DataFrame]:
    from harness import layer_sim
    run_cfg = cfg.copy()
    OmegaConf.set_struct(run_cfg, False)
    for key, v in over.items():
        OmegaConf.update(run_cfg, key, v, merge=False)
    with tempfile.TemporaryDirectory() as tmp:
        row = layer_sim.run(run_cfg, Path(tmp))
        stats = pd.read_csv(Path(tmp) / "stats.csv")
    return float(row["time_us"].iloc[0]), stats


def run(cfg: DictConfig, out_dir: Path) -> pd.DataFrame:
    check(cfg)
    d = cfg.drift
    syncs = [bool(s) for s in d.sync] if d.case == "ag_gemm" else [False]
    rows = []
    for source, level, param, value in points(cfg):
        over = _zero_all() if source == "all" else {f"gpu.{param}": value}
        for sync in syncs:
            for seed in d.seeds:
                seeded = cfg.copy()
                OmegaConf.update(seeded, "seed", int(seed))
                time_us, stats = (_ag_gemm_row(seeded, over, sync) if d.case == "ag_gemm"
                                  else _layer_row(seeded, over))
                row = {"case": d.case, "source": source, "level": level, "param": param, "value": value,
                       "sync": sync if d.case == "ag_gemm" else "scheme", "seed": int(seed),
                       "time_us": round(time_us, 4)}
                row.update(merge_summary(stats))
                rows.append(row)
    return pd.DataFrame(rows)
