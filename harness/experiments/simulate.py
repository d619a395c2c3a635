"""The default experiment: one simulation of the configured system and workload.

With the ``traffic`` GPU model every GPU issues remote reads and writes to random peers through
the switches; results.csv gets one row with the simulated time, delivered bytes, achieved
bandwidth and request latency, stats.csv beside it every hierarchical statistic, and series.csv
every time series (per link and direction: wire bytes per stats bin; columns name, bin, start_ns,
bin_ns, value).
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd
from omegaconf import DictConfig

from harness.errors import ConfigError
from harness.params.features import disabled_sections
from harness.results import write_csv_atomic
from harness.system import run_system


# Largest payload of one NVLink packet: what traffic.request_bytes may ask for.
MAX_PACKET_BYTES = 128

# The parameter sections of the GPU models a run does not use: each GPU model reads its own.
GPU_MODEL_SECTIONS = ("traffic", "collective", "synthetic")
# Other experiments' sections: one simulation reads none of them.
OTHER_EXPERIMENTS = (("compare", "validate", "drift", "figure", "paper"), "")


def ignored_keys(cfg: DictConfig) -> list[tuple[tuple[str, ...], str]]:
    """What this run never reads, and why: the other experiments' sections, the switch features
    net.features (a scheme's own, for a layer) leaves off, and by workload the sections of
    _workload_ignored_keys."""
    features = str(cfg.net.features or "")
    scheme = f" (scheme {cfg.scheme.name}'s)" if cfg.workload not in ("traffic", "collective") else ""
    return [OTHER_EXPERIMENTS,
            (disabled_sections(features), f"with net.features='{features}'{scheme}, which leaves that feature off"),
            _workload_ignored_keys(cfg)]


def _workload_ignored_keys(cfg: DictConfig) -> tuple[tuple[str, ...], str]:
    """An LLM layer runs on the Hopper engine whatever system.gpu_model says, so it reads no GPU
    model's section; a traffic run reads no model, phase, CAIS coordination or Hopper parameters
    (gpu.*), and only its own GPU model's section."""
    if cfg.workload == "collective":
        from harness import collective_run
        return ("traffic", "synthetic", "system.gpu_model", "model", "phase", "coordination") + \
            collective_run.ignored_collective_keys(), \
            "with workload=collective (the library's kernel on the Hopper engine; the rest of collective.* is " \
            "the NCCL-like model's)"
    if cfg.workload != "traffic":
        return GPU_MODEL_SECTIONS + ("system.gpu_model",), \
            f"with workload={cfg.workload} (an LLM layer runs on the Hopper engine)"
    model = str(cfg.system.gpu_model)
    if cfg.scheme.name != "none" or model not in GPU_MODEL_SECTIONS:  # run() refuses these itself
        return (), ""
    # gpu.* are the Hopper engine's parameters: no other GPU model reads them
    return (("model", "phase", "coordination", "gpu") + tuple(s for s in GPU_MODEL_SECTIONS if s != model),
            f"with workload=traffic and system.gpu_model={model}")


def check(cfg: DictConfig) -> None:
    """Refuse runs that would succeed with nothing to show (all-zero rows, a reported deadlock)."""
    model = cfg.system.gpu_model
    if model == "hopper":
        raise ConfigError("system.gpu_model", "hopper runs tile-ISA kernels and this experiment gives it none; "
                          "allowed here: traffic, collective, synthetic (single-GPU kernels: "
                          "experiment=validate_kernels)")
    if cfg.system.gpus == 1:  # zero and negative counts: topology.build names them
        raise ConfigError("system.gpus", f"must be >= 2 for this experiment (GPUs exchange traffic through the "
                          f"switches), got {cfg.system.gpus}")
    if model == "traffic":
        t = cfg.traffic
        if t.requests_per_gpu < 1:
            raise ConfigError("traffic.requests_per_gpu", f"must be >= 1, got {t.requests_per_gpu}")
        if not 1 <= t.request_bytes <= MAX_PACKET_BYTES:
            raise ConfigError("traffic.request_bytes", f"must be 1..{MAX_PACKET_BYTES} (one NVLink packet), "
                              f"got {t.request_bytes}")
        if t.issue_gap_ns < 0:
            raise ConfigError("traffic.issue_gap_ns", f"must be >= 0, got {t.issue_gap_ns}")


def run(cfg: DictConfig, out_dir: Path) -> pd.DataFrame:
    if cfg.workload == "collective":  # one collective as the library's tile-ISA kernel
        from harness import collective_run
        return collective_run.run(cfg, out_dir)
    if cfg.workload != "traffic":  # an LLM layer or sub-layer lowered by a scheme
        from harness import layer_sim
        if cfg.workload not in layer_sim.LAYER_WORKLOADS:
            raise ConfigError("workload", f"unknown workload '{cfg.workload}' (choices: traffic, collective, "
                              f"{', '.join(layer_sim.LAYER_WORKLOADS)})")
        return layer_sim.run(cfg, out_dir)
    if cfg.scheme.name != "none":
        raise ConfigError("scheme", f"scheme={cfg.scheme.name} lowers LLM layers: it needs workload=layer or "
                          "sublayer_l1..sublayer_l4 (workload=traffic runs no scheme)")
    check(cfg)
    result = run_system(cfg)
    stats = result.stats
    write_csv_atomic(out_dir / "stats.csv", stats, exact=True)
    write_csv_atomic(out_dir / "series.csv", result.series)

    def total(pattern: str) -> float:
        return float(stats.loc[stats["name"].str.fullmatch(pattern), "value"].sum())

    gpus = cfg.system.gpus
    end_us = result.end_ps / 1e6
    finish_us = total(r"gpu\d+\.finish_time") / max(gpus, 1) / 1e6
    completed = total(r"gpu\d+\.requests_completed")
    data_bytes = total(r"gpu\d+\.(read|write)_bytes")
    lat = stats[stats["name"].str.fullmatch(r"gpu\d+\.request_latency\.mean")]
    counts = stats[stats["name"].str.fullmatch(r"gpu\d+\.request_latency\.count")]
    mean_latency_ns = float((lat["value"].values * counts["value"].values).sum() / max(counts["value"].sum(), 1))
    row = {
        "system": cfg.system.name,
        "gpus": gpus,
        "gpu_model": cfg.system.gpu_model,
        "workload": cfg.workload,
        "seed": cfg.seed,
        "sim_time_us": end_us,
        "mean_gpu_finish_us": finish_us,
        "requests": int(completed),
        "data_bytes": int(data_bytes),
        "data_GBps_per_gpu": data_bytes / max(gpus, 1) / (end_us * 1e3) if end_us > 0 else 0.0,
        "mean_request_latency_ns": mean_latency_ns,
        "switch_flits": int(total(r"sw\d+\.port\d+\.tx\.flits") + total(r"(leaf|spine)\d+\.port\d+\.tx\.flits")),
    }
    return pd.DataFrame([row])
