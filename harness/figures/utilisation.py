"""Figures of link utilisation: fig15 (average over each sub-layer) and fig16 (over time, from
each point's series.csv: wire bytes per link and direction per stats bin)."""
from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from harness.figures import Figure, register
from harness.figures._paper import finding, label, row
from harness.figures.speedup import SUBLAYERS

ORDER = ["cais_base", "cais_partial", "cais"]
FINDINGS = {"cais_base": "bw_util_cais_base", "cais_partial": "bw_util_cais_partial", "cais": "bw_util_cais"}
_WIRE = re.compile(r"(gpu|sw)(\d+)\.port(\d+)\.tx\.wire_bytes")


def fig15_table(points: pd.DataFrame) -> pd.DataFrame:
    df = points[["model", "workload", "scheme", "time_us", "link_util"]].rename(columns={"workload": "sublayer"})
    df = df.copy()
    df["sublayer"] = df["sublayer"].map(SUBLAYERS).fillna(df["sublayer"])
    return df


def fig15_plot(t: pd.DataFrame, canvas) -> None:
    ax = canvas.add_subplot(1, 1, 1)
    keys = list(dict.fromkeys(t["model"] + " " + t["sublayer"]))
    schemes = [s for s in ORDER if s in set(t["scheme"])] + [s for s in dict.fromkeys(t["scheme"]) if s not in ORDER]
    width = 0.8 / max(len(schemes), 1)
    for j, s in enumerate(schemes):
        sub = t[t["scheme"] == s]
        sub = sub.set_index(sub["model"] + " " + sub["sublayer"])["link_util"]
        ax.bar([x + j * width for x in range(len(keys))], [100 * sub.get(k, float("nan")) for k in keys], width,
               label=label(s))
    ax.set_xticks([x + 0.4 - width / 2 for x in range(len(keys))], keys, rotation=45, fontsize=7)
    ax.set_ylabel("average link utilisation (%)")
    ax.legend(fontsize=8)


def fig15_paper(t: pd.DataFrame) -> list[dict]:
    means = t.groupby("scheme")["link_util"].mean() * 100
    out = [row(f"fig15: average link utilisation of {label(s)} (%)", means[s], finding(FINDINGS[s]), "link_util_pct")
           for s in ORDER if s in means]
    if all(s in means for s in ORDER):
        ordered = float(means["cais_base"] < means["cais_partial"] < means["cais"])
        out.append(row("fig15: order CAIS-Base < CAIS-Partial < CAIS (1 = yes)", ordered, 1.0, "link_util_order"))
    return out


register(Figure("fig15", "Average link utilisation per sub-layer", fig15_table, fig15_plot, fig15_paper))


# ------------------------------------------------------------------------ fig16
def utilisation_over_time(point_dir: str) -> pd.DataFrame:
    """Per stats bin: wire bytes of every GPU-switch link and direction / their capacity."""
    from omegaconf import OmegaConf

    cfg = OmegaConf.load(Path(point_dir) / "config.yaml")
    gpus = int(cfg.system.gpus)
    series = pd.read_csv(Path(point_dir) / "series.csv")
    keep = [bool(m) and (m.group(1) == "gpu" or int(m.group(3)) < gpus)
            for m in map(_WIRE.fullmatch, series["name"])]
    s = series[keep]
    lane_bytes_per_ns = float(cfg.system.lane_bw_gbps)  # GB/s = bytes per ns
    capacity_per_ns = 2 * gpus * sum(int(n) for n in cfg.system.lanes_per_switch) * lane_bytes_per_ns
    per_bin = s.groupby(["bin", "start_ns", "bin_ns"], as_index=False)["value"].sum()
    per_bin["link_util"] = per_bin["value"] / (capacity_per_ns * per_bin["bin_ns"])
    return per_bin


def fig16_table(points: pd.DataFrame) -> pd.DataFrame:
    frames = []
    for _, p in points.iterrows():
        u = utilisation_over_time(p["point"])
        frames.append(pd.DataFrame({"model": p["model"], "sublayer": SUBLAYERS.get(p["workload"], p["workload"]),
                                    "scheme": p["scheme"], "start_us": u["start_ns"] / 1e3,
                                    "link_util": u["link_util"].round(6)}))
    return pd.concat(frames, ignore_index=True)


def fig16_plot(t: pd.DataFrame, canvas) -> None:
    schemes = [s for s in ORDER if s in set(t["scheme"])] + [s for s in dict.fromkeys(t["scheme"]) if s not in ORDER]
    for i, s in enumerate(schemes):
        ax = canvas.add_subplot(len(schemes), 1, i + 1)
        sub = t[t["scheme"] == s]
        ax.plot(sub["start_us"], 100 * sub["link_util"], lw=0.8)
        ax.set_ylim(0, 105)
        ax.set_ylabel(f"{label(s)} (%)", fontsize=8)
    canvas.axes[-1].set_xlabel("time (us)")


register(Figure("fig16", "Link utilisation over time (L2 sub-layer)", fig16_table, fig16_plot, lambda t: []))
