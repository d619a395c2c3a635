"""fig2 (computation vs communication time of a TP-NVLS layer as the GPU count grows) and fig18
(NVLS AllReduce of 1-16 GB beside public H100 NVLS figures)."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from harness.figures import Figure, register
from harness.figures._paper import csv, finding, row


def _kernel_split(point_dir: str) -> tuple[float, float]:
    """(compute_us, comm_us): the durations of the layer's compute ops and collective ops, each op
    from its first kernel's start to its last kernel's end (kernels.csv); the op kinds come from
    the operator graph the run lowered (rebuilt from its config.yaml)."""
    from omegaconf import OmegaConf

    from harness import schemes
    from harness.workload import build, from_config
    from harness.workload.graph import Collective

    cfg = OmegaConf.load(Path(point_dir) / "config.yaml")
    spec = schemes.get(str(cfg.scheme.name))
    graph = build(from_config(cfg.model), str(cfg.phase), str(cfg.workload), spec.partition, int(cfg.system.gpus))
    comm_ops = {op.name for op in graph.ops if isinstance(op, Collective)}
    kt = pd.read_csv(Path(point_dir) / "kernels.csv")
    span = kt.groupby("op").agg(start=("start_us", "min"), end=("end_us", "max"))
    dur = span["end"] - span["start"]
    comm = float(dur[dur.index.isin(comm_ops)].sum())
    return float(dur.sum()) - comm, comm


def fig2_table(points: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for _, p in points.iterrows():
        compute, comm = _kernel_split(p["point"])
        rows.append({"gpus": int(p["gpus"]), "model": p["model"], "scheme": p["scheme"], "time_us": p["time_us"],
                     "compute_us": round(compute, 4), "comm_us": round(comm, 4),
                     "comm_over_compute": round(comm / compute, 4) if compute else float("nan")})
    return pd.DataFrame(rows).sort_values("gpus").reset_index(drop=True)


def fig2_plot(t: pd.DataFrame, canvas) -> None:
    ax = canvas.add_subplot(1, 1, 1)
    x = range(len(t))
    ax.bar([i - 0.2 for i in x], t["compute_us"], 0.4, label="computation")
    ax.bar([i + 0.2 for i in x], t["comm_us"], 0.4, label="communication")
    ax.set_xticks(list(x), [str(g) for g in t["gpus"]])
    ax.set_xlabel("GPUs")
    ax.set_ylabel("time per layer (us)")
    ax.legend()


def fig2_paper(t: pd.DataFrame) -> list[dict]:
    at8 = t[t["gpus"] == 8]
    return [row("fig2: communication / computation at 8 GPUs", float(at8["comm_over_compute"].iloc[0]),
                finding("comm_vs_comp_8gpu"), "comm_over_compute")] if len(at8) else []


register(Figure("fig2", "Computation vs communication time when scaling up (TP-NVLS)", fig2_table, fig2_plot,
                fig2_paper))


# ------------------------------------------------------------------------ fig18
def public_nvls_busbw() -> float:
    """NCCL NVLS AllReduce bus bandwidth of 8 x H100 at large messages (public figures)."""
    pub = csv("public_nccl_h100.csv")
    sel = pub[(pub["collective"] == "all_reduce") & (pub["nvls"] == "on") & pub["system"].str.contains("H100")]
    return float(sel["busbw_GBps"].astype(float).iloc[0])


def fig18_table(points: pd.DataFrame) -> pd.DataFrame:
    from omegaconf import OmegaConf

    sizes = [int(OmegaConf.load(Path(p) / "config.yaml").collective.bytes) for p in points["point"]]
    df = pd.DataFrame({"bytes": sizes, "gpus": points["gpus"].astype(int), "time_us": points["sim_time_us"]})
    n = df["gpus"]
    df["busbw_GBps"] = (df["bytes"] * 2 * (n - 1) / n / (df["time_us"] * 1e3)).round(3)
    df["public_busbw_GBps"] = public_nvls_busbw()
    df["err_pct"] = ((df["busbw_GBps"] / df["public_busbw_GBps"] - 1) * 100).round(3)
    return df.sort_values("bytes").reset_index(drop=True)


def fig18_plot(t: pd.DataFrame, canvas) -> None:
    ax = canvas.add_subplot(1, 1, 1)
    labels = [f"{b / 2**30:g} GB" if b >= 2**30 else f"{b / 2**20:g} MB" for b in t["bytes"]]
    x = range(len(t))
    ax.bar([i - 0.2 for i in x], t["busbw_GBps"], 0.4, label="simulated")
    ax.bar([i + 0.2 for i in x], t["public_busbw_GBps"], 0.4, label="public 8 x H100 NVLS")
    ax.set_xticks(list(x), labels)
    ax.set_ylabel("AllReduce bus bandwidth (GB/s)")
    ax.legend(loc="lower right")  # the bars are about equal: above them it would cover one


def fig18_paper(t: pd.DataFrame) -> list[dict]:
    return [row("fig18: mean |error| of NVLS AllReduce bus bandwidth vs public (%)", t["err_pct"].abs().mean(),
                finding("nvls_validation_error"), "nvls_error_pct")]


register(Figure("fig18", "NVLS AllReduce: simulated vs public H100 figures", fig18_table, fig18_plot, fig18_paper))
