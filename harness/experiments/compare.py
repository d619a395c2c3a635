"""Schemes side by side on one layer workload (the README's first command).

Every scheme of ``compare.schemes`` lowers the same model, phase and workload and runs on the
same system; each run is the ordinary layer run (harness/layer_sim.py) with ``scheme=<name>``
composed over this run's overrides, its stats.csv, series.csv and kernels.csv in
``<out_dir>/<scheme>/``. results.csv gets one row per scheme: the layer run's row plus
``speedup`` (the baseline's time over the scheme's), ``moved_mb`` (payload and header bytes the
GPUs put on NVLink, every packet type) and the CAIS merge unit's ``merge_hits`` (requests served
or absorbed by an existing merge entry). compare.png beside it plots both.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

import pandas as pd
from omegaconf import DictConfig

from harness import layer_sim, schemes
from harness.errors import ConfigError

SUMMARY = ["scheme", "time_us", "speedup", "moved_mb", "link_util", "merge_hits"]
DISPLAY = SUMMARY  # what the CLI prints; results.csv has every column of the layer runs


def check(cfg: DictConfig) -> list[str]:
    names = list(cfg.compare.schemes)
    if not names:
        raise ConfigError("compare.schemes", "is empty; give at least one scheme, e.g. [tp_nvls,cais]")
    known = schemes.available()
    for n in names:
        if n not in known:
            raise ConfigError("compare.schemes", f"unknown scheme '{n}' (choices: {', '.join(known)})")
    if len(set(names)) != len(names):
        raise ConfigError("compare.schemes", f"lists a scheme twice: {names}")
    if cfg.compare.baseline not in names:
        raise ConfigError("compare.baseline", f"'{cfg.compare.baseline}' is not one of compare.schemes {names}")
    if cfg.workload == "traffic":
        raise ConfigError("workload", "experiment=compare runs layer workloads (layer, sublayer_l1..sublayer_l4), "
                          "not traffic")
    return names


def config_for(scheme: str) -> DictConfig:
    """This run's configuration with scheme=<scheme>: the command line's overrides composed again,
    so the scheme's own file (its parameters and the switch features it needs) applies."""
    from hydra import compose
    from hydra.core.hydra_config import HydraConfig

    keep = [o for o in HydraConfig.get().overrides.task
            if not re.match(r"[+~]*scheme(\.|=)", o)]
    return compose(config_name="config", overrides=keep + [f"scheme={scheme}"])


def summarise(rows: pd.DataFrame, baseline: str) -> pd.DataFrame:
    base = float(rows.loc[rows["scheme"] == baseline, "time_us"].iloc[0])
    out = rows.copy()
    out["speedup"] = (base / out["time_us"]).round(3)
    byte_cols = [c for c in out.columns if c.startswith("bytes_")]
    out["moved_mb"] = (out[byte_cols].fillna(0).sum(axis=1) / 1e6).round(3)
    # layer rows carry the merge summary only where the merge unit ran (harness/merge_stats.py)
    out["merge_hits"] = (out["merge_hits"] if "merge_hits" in out else pd.Series(0, index=out.index)).fillna(0).astype(int)
    front = [c for c in SUMMARY if c in out.columns]
    return out[front + [c for c in out.columns if c not in front]]


def plot(df: pd.DataFrame, baseline: str, title: str, path: Path) -> None:
    import logging

    import matplotlib

    logging.getLogger("matplotlib").setLevel(logging.WARNING)  # no font-cache chatter on a first run
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_t, ax_b) = plt.subplots(1, 2, figsize=(9, 3.4))
    x = range(len(df))
    ax_t.bar(x, df["time_us"], color=["#888888" if s == baseline else "#1f77b4" for s in df["scheme"]])
    for i, (t, s) in enumerate(zip(df["time_us"], df["speedup"])):
        ax_t.text(i, t, f"{s:.2f}x", ha="center", va="bottom", fontsize=8)
    ax_t.set_ylabel("time (us)")
    ax_t.set_title(f"time (speedup over {baseline})", fontsize=9)
    ax_b.bar(x, df["moved_mb"], color="#2ca02c")
    ax_b.set_ylabel("NVLink bytes from GPUs (MB)")
    ax_b.set_title("bytes moved", fontsize=9)
    for ax in (ax_t, ax_b):
        ax.set_xticks(list(x), df["scheme"], rotation=30, ha="right", fontsize=8)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    tmp = path.with_suffix(".tmp.png")
    fig.savefig(tmp, dpi=120)
    plt.close(fig)
    tmp.replace(path)


def run(cfg: DictConfig, out_dir: Path) -> pd.DataFrame:
    names = check(cfg)
    rows = []
    for name in names:
        scfg = config_for(name)
        rows.append(layer_sim.run(scfg, out_dir / name))
    df = summarise(pd.concat(rows, ignore_index=True), str(cfg.compare.baseline))
    title = (f"{cfg.model.name} {cfg.phase} {cfg.workload} on {cfg.system.name} "
             f"({cfg.system.gpus} GPUs, {cfg.gpu.num_sms} SMs)")
    figure = out_dir / "compare.png"
    plot(df, str(cfg.compare.baseline), title, figure)
    print(f"compared: {title}", file=sys.stderr)
    print(f"figure: {figure}", file=sys.stderr)
    return df
