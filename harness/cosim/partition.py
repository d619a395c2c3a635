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


def _deal(nodes: list[int], processes: int) -> list[list[int]]:
    """`nodes` in `processes` contiguous runs whose sizes differ by at most one."""
    return [nodes[i * len(nodes) // processes:(i + 1) * len(nodes) // processes] for i in range(processes)]


def partition(topo, gpus_per_process=None, switches_per_process=None, colocate: bool = False,
              processes: int = 2) -> Partition:
    """Nodes to engine processes. One process with `colocate`; by kind (GPU engines of
    gpus_per_process GPUs, network engines of switches_per_process switches) when either is
    given; otherwise `processes` processes, each an even share of the GPUs and of the switches,
    so that both cores work in every window and a GPU's links to its own process's switches
    cross no process boundary (docs/PERFORMANCE.md, "Engines per process")."""
    gpus = [n.id for n in topo.nodes if n.kind == pb.NODE_GPU]
    switches = [n.id for n in topo.nodes if n.kind == pb.NODE_SWITCH]
    engines: list[EngineSpec] = []
    if colocate:
        engines.append(EngineSpec("engine0", gpus + switches))
    elif gpus_per_process is not None or switches_per_process is not None:
        gpp = len(gpus) if gpus_per_process is None else _per_process(gpus_per_process, "cosim.gpus_per_process")
        spp = 1 if switches_per_process is None else _per_process(switches_per_process, "cosim.switches_per_process")
        for i in range(0, len(gpus), gpp):
            engines.append(EngineSpec(f"gpu_engine{i // gpp}", gpus[i:i + gpp]))
        for i in range(0, len(switches), spp):
            engines.append(EngineSpec(f"net_engine{i // spp}", switches[i:i + spp]))
    else:
        count = _per_process(processes, "cosim.processes")
        total = len(gpus) + len(switches)
        if count > total:
            raise ConfigError("cosim.processes", f"must be at most the system's {total} nodes, got {count}")
        if count <= min(len(gpus), len(switches)):
            shares = [g + s for g, s in zip(_deal(gpus, count), _deal(switches, count))]
        else:  # fewer GPUs or switches than processes: runs of all the nodes, none empty
            shares = _deal(gpus + switches, count)
        for i, nodes in enumerate(shares):
            engines.append(EngineSpec(f"engine{i}", nodes))
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
