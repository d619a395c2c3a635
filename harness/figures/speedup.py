"""Figures of scheme times and speedups: fig11 (end to end), fig12 (sub-layers), table2 (full vs
half scale) and fig17 (GPU count). Speedup = T_scheme / T_CAIS (spec section 4)."""
from __future__ import annotations

import pandas as pd

from harness.figures import Figure, register
from harness.figures._paper import CAIS, csv, finding, geomean, label, relative_to, row

SUBLAYERS = {"sublayer_l1": "L1", "sublayer_l2": "L2", "sublayer_l3": "L3", "sublayer_l4": "L4"}


def _with_ratios(df: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    df = df.copy()
    df["speedup"] = relative_to(df, by, CAIS)            # T_scheme / T_CAIS
    df["time_rel_tp_nvls"] = relative_to(df, by, "tp_nvls")
    return df


def _bars(df: pd.DataFrame, canvas, groups: list[str], value: str, ylabel: str) -> None:
    """One panel per value of groups[0]; bars per scheme within each group of the others."""
    panels = list(dict.fromkeys(df[groups[0]]))
    schemes = list(dict.fromkeys(df["scheme"]))
    for i, p in enumerate(panels):
        ax = canvas.add_subplot(1, len(panels), i + 1)
        sub = df[df[groups[0]] == p]
        keys = list(dict.fromkeys(sub[groups[1:]].astype(str).agg(" ".join, axis=1))) if groups[1:] else [""]
        width = 0.8 / max(len(schemes), 1)
        for j, s in enumerate(schemes):
            vals = []
            for k in keys:
                sel = sub[(sub["scheme"] == s) & ((sub[groups[1:]].astype(str).agg(" ".join, axis=1) == k)
                                                  if groups[1:] else True)]
                vals.append(float(sel[value].iloc[0]) if len(sel) else float("nan"))
            ax.bar([x + j * width for x in range(len(keys))], vals, width, label=label(s))
        ax.set_xticks([x + 0.4 - width / 2 for x in range(len(keys))], keys, fontsize=8)
        ax.set_title(str(p), fontsize=9)
        ax.set_ylabel(ylabel if i == 0 else "")
        ax.axhline(1.0, color="grey", lw=0.6)
    canvas.axes[-1].legend(fontsize=7, ncol=1, bbox_to_anchor=(1.02, 1), loc="upper left")


def _geomean_rows(df: pd.DataFrame, figure: str, phase_col: str | None) -> list[dict]:
    """CAIS's geomean speedup over each baseline per phase (spec A20), beside the paper's; and each
    scheme's time relative to TP-NVLS beside the derived targets (which need no CAIS run)."""
    out = []
    ref = csv("speedup_geomean.csv")
    rel = csv("derived_time_rel_tp_nvls.csv")
    phases = list(dict.fromkeys(df[phase_col])) if phase_col else ["sublayer"]
    for phase in phases:
        sub = df[df[phase_col] == phase] if phase_col else df
        for scheme in dict.fromkeys(sub["scheme"]):
            s = sub[sub["scheme"] == scheme]
            paper = ref[(ref["figure"] == figure) & (ref["phase"] == phase) & (ref["baseline"] == label(scheme))]
            if len(paper) and scheme != CAIS:
                out.append(row(f"{figure} {phase}: CAIS speedup over {label(scheme)} (geomean)",
                               geomean(s["speedup"]), paper["cais_speedup_geomean"].iloc[0], "speedup_geomean"))
            target = rel[(rel["phase"] == phase) & (rel["scheme"] == label(scheme))] if figure == "fig11" else rel[:0]
            if len(target) and scheme != "tp_nvls":
                out.append(row(f"{figure} {phase}: {label(scheme)} time / TP-NVLS (geomean)",
                               geomean(s["time_rel_tp_nvls"]), target["time_rel_tp_nvls"].iloc[0],
                               "time_rel_tp_nvls"))
    return out


# ------------------------------------------------------------------------ fig11
def fig11_table(points: pd.DataFrame) -> pd.DataFrame:
    df = points[["model", "phase", "scheme", "time_us", "e2e_ms"]]
    return _with_ratios(df, ["model", "phase"])


register(Figure(
    "fig11", "End-to-end speedup of CAIS (T_scheme / T_CAIS), training and inference", fig11_table,
    lambda t, c: _bars(t.assign(speedup=t["speedup"].fillna(t["time_rel_tp_nvls"])), c, ["phase", "model"],
                       "speedup", "T_scheme / T_CAIS (T / T_TP-NVLS without CAIS)"),
    lambda t: _geomean_rows(t, "fig11", "phase")))


# ------------------------------------------------------------------------ fig12
def fig12_table(points: pd.DataFrame) -> pd.DataFrame:
    df = points[["model", "phase", "workload", "scheme", "time_us"]].rename(columns={"workload": "sublayer"})
    df["sublayer"] = df["sublayer"].map(SUBLAYERS).fillna(df["sublayer"])
    return _with_ratios(df, ["model", "phase", "sublayer"])


register(Figure(
    "fig12", "Sub-layer (L1-L4, training) speedup of CAIS", fig12_table,
    lambda t, c: _bars(t.assign(speedup=t["speedup"].fillna(t["time_rel_tp_nvls"])), c, ["model", "sublayer"],
                       "speedup", "T_scheme / T_CAIS (T / T_TP-NVLS without CAIS)"),
    lambda t: _geomean_rows(t, "fig12", None)))


# ------------------------------------------------------------------------ table2
def table2_table(points: pd.DataFrame) -> pd.DataFrame:
    df = points[["system", "model", "num_sms", "scheme", "time_us"]].copy()
    df.insert(0, "setup", ["full" if n > 66 else "half" for n in df["num_sms"]])
    df["speedup"] = relative_to(df, ["setup"], "tp_nvls")
    df["speedup"] = 1.0 / df["speedup"]  # T_TP-NVLS / T_scheme: CAIS's row is Table II's number
    return df


def table2_paper(t: pd.DataFrame) -> list[dict]:
    out = []
    cais = t[t["scheme"] == CAIS].set_index("setup")["speedup"]
    for setup in ("full", "half"):
        out.append(row(f"table2 {setup}: CAIS speedup over TP-NVLS", cais.get(setup, float("nan")),
                       finding(f"scaled_down_{setup}"), "table2_speedup"))
    gap = abs(cais.get("full", float("nan")) - cais.get("half", float("nan")))
    out.append(row("table2: |full - half| speedup", gap, abs(finding("scaled_down_full") - finding("scaled_down_half")),
                   "table2_gap"))
    return out


register(Figure(
    "table2", "Scaled-down validation: speedup over TP-NVLS at full and half scale", table2_table,
    lambda t, c: _bars(t.assign(all="LLaMA-7B"), c, ["all", "setup"], "speedup", "T_TP-NVLS / T_scheme"),
    table2_paper))


# ------------------------------------------------------------------------ fig17
def fig17_table(points: pd.DataFrame) -> pd.DataFrame:
    df = points[["gpus", "model", "scheme", "time_us", "gemm_tflops_per_gpu"]].copy()
    base = df[(df["scheme"] == CAIS) & (df["gpus"] == df["gpus"].min())]["gemm_tflops_per_gpu"]
    df["normalised_throughput"] = df["gemm_tflops_per_gpu"] / (float(base.iloc[0]) if len(base) else float("nan"))
    return df.sort_values(["scheme", "gpus"]).reset_index(drop=True)


def fig17_plot(t: pd.DataFrame, canvas) -> None:
    ax = canvas.add_subplot(1, 1, 1)
    for s in dict.fromkeys(t["scheme"]):
        sub = t[t["scheme"] == s]
        ax.plot(sub["gpus"], sub["normalised_throughput"], marker="o", label=label(s))
    ax.set_xlabel("GPUs")
    ax.set_ylabel("per-GPU throughput / 8-GPU CAIS")
    ax.set_xticks(sorted(set(t["gpus"])))
    ax.legend()


def fig17_paper(t: pd.DataFrame) -> list[dict]:
    cais = t[t["scheme"] == CAIS].set_index("gpus")["normalised_throughput"]
    if len(cais) < 2:
        return []
    drop = (1.0 - cais.iloc[-1] / cais.iloc[0]) * 100
    return [row(f"fig17: CAIS per-GPU throughput drop {cais.index[0]} -> {cais.index[-1]} GPUs (%)", drop,
                finding("scalability_32gpu"), "scalability_drop_pct")]


register(Figure("fig17", "Scalability: per-GPU throughput vs GPU count", fig17_table, fig17_plot, fig17_paper))
