"""Assign nodes to engine processes and derive the lock-step window (lookahead)."""
from __future__ import annotations

from dataclasses import dataclass, field

from harness.errors import ConfigError
from harness.protocol import cosim as pb


@dataclass
class EngineSpec:
    name: str
    nodes: list[int] = field(default_factory=list)


@dataclass
class Partition:
    engines: list[EngineSpec]
    node_engine: list[int]
    window_ps: int


def _per_process(value, key: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ConfigError(key, f"must be a positive integer, got {value!r}")
    return value


def partition(topo, gpus_per_process, switches_per_process, colocate: bool = False) -> Partition:
    gpus = [n.id for n in topo.nodes if n.kind == pb.NODE_GPU]
    switches = [n.id for n in topo.nodes if n.kind == pb.NODE_SWITCH]
    engines: list[EngineSpec] = []
    if colocate:
        engines.append(EngineSpec("engine0", gpus + switches))
    else:
        gpp = _per_process(gpus_per_process, "cosim.gpus_per_process")
        spp = _per_process(switches_per_process, "cosim.switches_per_process")
        for i in range(0, len(gpus), gpp):
            engines.append(EngineSpec(f"gpu_engine{i // gpp}", gpus[i:i + gpp]))
        for i in range(0, len(switches), spp):
            engines.append(EngineSpec(f"net_engine{i // spp}", switches[i:i + spp]))
    node_engine = [0] * len(topo.nodes)
    for idx, e in enumerate(engines):
        for n in e.nodes:
            node_engine[n] = idx
    crossing = [l.latency_ps for l in topo.links if node_engine[l.src_node] != node_engine[l.dst_node]]
    if crossing:
        window = min(crossing)
        if window <= 0:
            raise ConfigError("system.link_latency_ns", "a link that crosses processes needs a latency > 0")
    else:  # one process: nothing to exchange, any window is exact
        window = max(l.latency_ps for l in topo.links)
    return Partition(engines, node_engine, window)
