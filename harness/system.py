"""From a resolved config to what the engines need: topology, flat params, cosim options."""
from __future__ import annotations

from typing import Any

from omegaconf import DictConfig

from harness import params as param_groups
from harness import topology
from harness.gpu import power
from harness.cosim import SimResult, simulate


def engine_params(cfg: DictConfig, kind: str = "tensor", burst: bool = False) -> dict[str, Any]:
    """The engines' flat parameters; a power-aware clock (`gpu.clock_mhz` = 0) resolved for all
    SMs running `kind` kernels: tensor for anything with GEMMs (a layer's GEMMs set its power),
    memory for runs of memory-bound kernels alone (harness/gpu/power.py). burst: a run as short
    as a measured burst from an idle GPU, whose clock follows the load (the burst clock while a
    GEMM runs, the memory-bound one otherwise; power.resolve_burst_clocks), not one settled clock."""
    flat = param_groups.flatten(cfg, param_groups.discover())
    flat["host.gpu_model"] = cfg.system.gpu_model
    flat["host.switch_model"] = cfg.system.switch_model
    return power.resolve_burst_clocks(flat) if burst else power.resolve_clock(flat, kind)


def cosim_options(cfg: DictConfig) -> dict[str, Any]:
    c = cfg.cosim
    return dict(gpus_per_process=c.gpus_per_process, switches_per_process=c.switches_per_process,
                colocate=c.colocate, processes=c.processes, transport=c.transport, tcp_host=c.tcp_host, launcher=c.launcher,
                connect_timeout_s=c.connect_timeout_s, reply_timeout_s=c.reply_timeout_s,
                max_sim_time_us=c.max_sim_time_us, fault=c.fault, watch=list(c.watch), shm_spin_us=c.shm_spin_us)


def run_system(cfg: DictConfig, workload: bytes = b"", overrides: dict[str, Any] | None = None,
               kind: str = "tensor") -> SimResult:
    """Simulate cfg.system with the engine parameters of cfg (plus `overrides`); a power-aware
    clock resolved for `kind` kernels (engine_params)."""
    topo = topology.build(cfg.system)
    params = engine_params(cfg, kind)
    params.update(overrides or {})
    return simulate(topo, params, seed=cfg.seed, workload=workload, **cosim_options(cfg))
