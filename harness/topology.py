"""Build the network topology (proto Topology) from the system config.

Node ids: GPUs 0..G-1 first, then switches. Every channel is a pair of opposite links between
the same two ports, so port p of a node both sends to and receives from one peer.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from harness.errors import ConfigError
from harness.protocol import cosim as pb

TOPOLOGIES = ("dgx", "xbar", "fat_tree")
# The engines give a component the id `node << 8 | sub-index` in the 24 bits above an event's
# sequence number (cais/component.h): node ids must fit in 16 bits.
MAX_NODES = 1 << 16
# Channels are built one by one here (~4 us each): 2^18 is ~1 s, 512x the paper's largest system
# (fat_tree_256: 512 channels). A count past it is a typo (system.gpus=1844674407 built for hours).
MAX_CHANNELS = 1 << 18
MAX_LATENCY_PS = 10**12  # the engines' bound on a link's latency (kMaxLinkLatencyPs, sim.cc)


@dataclass
class _Builder:
    name: str
    latency_ps: int
    lane_bw: float

    def __post_init__(self):
        self.topo = pb.Topology(name=self.name)
        self.ports: list[int] = []

    def node(self, kind: int, name: str) -> int:
        nid = len(self.topo.nodes)
        self.topo.nodes.add(id=nid, kind=kind, name=name, num_ports=0)
        self.ports.append(0)
        return nid

    def channel(self, a: int, b: int, lanes: int) -> None:
        pa, pb_ = self.ports[a], self.ports[b]
        self.ports[a] += 1
        self.ports[b] += 1
        bw = lanes * self.lane_bw
        self.topo.links.add(src_node=a, src_port=pa, dst_node=b, dst_port=pb_, bw_gbps=bw,
                            latency_ps=self.latency_ps, lanes=lanes)
        self.topo.links.add(src_node=b, src_port=pb_, dst_node=a, dst_port=pa, bw_gbps=bw,
                            latency_ps=self.latency_ps, lanes=lanes)

    def done(self):
        for n in self.topo.nodes:
            n.num_ports = self.ports[n.id]
        return self.topo


def _positive_int(value, key: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ConfigError(key, f"must be a positive integer, got {value!r}")
    return value


def _check_size(nodes: int, channels: int, key: str) -> None:
    if nodes > MAX_NODES:
        raise ConfigError(key, f"{nodes} nodes (GPUs and switches): the engines address at most {MAX_NODES}")
    if channels > MAX_CHANNELS:
        raise ConfigError(key, f"{channels} GPU-switch channels: at most {MAX_CHANNELS} (a larger system "
                          "would take minutes to describe)")


def build(system) -> "pb.Topology":
    kind = system.topology
    if kind not in TOPOLOGIES:
        raise ConfigError("system.topology", f"'{kind}' is not one of: {', '.join(TOPOLOGIES)}")
    gpus = _positive_int(system.gpus, "system.gpus")
    if not 0 < system.lane_bw_gbps < math.inf:
        raise ConfigError("system.lane_bw_gbps", f"must be > 0 GB/s and finite, got {system.lane_bw_gbps}")
    latency_ns = system.link_latency_ns
    if not (math.isfinite(latency_ns) and 1 <= round(latency_ns * 1000) <= MAX_LATENCY_PS):
        raise ConfigError("system.link_latency_ns", f"must be 0.001 to 1e9 ns (1 ps to 1 s, as the engines allow), "
                          f"got {latency_ns}")
    if gpus >= MAX_NODES:  # before the checks below, which would otherwise loop over them
        raise ConfigError("system.gpus", f"{gpus} GPUs: the engines address at most {MAX_NODES} nodes "
                          "(GPUs and switches)")
    if kind == "dgx":
        planes = _positive_int(system.switches, "system.switches")
        _check_size(gpus + planes, gpus * planes, "system.switches")
        lanes = list(system.lanes_per_switch)
        if len(lanes) != planes or any((not isinstance(x, int)) or x <= 0 for x in lanes):
            raise ConfigError("system.lanes_per_switch",
                              f"needs {planes} positive integers (one per switch), got {lanes}")
    b = _Builder(system.name, round(system.link_latency_ns * 1000), float(system.lane_bw_gbps))
    gpu_ids = [b.node(pb.NODE_GPU, f"gpu{g}") for g in range(gpus)]

    if kind == "dgx":
        sw = [b.node(pb.NODE_SWITCH, f"sw{s}") for s in range(planes)]
        for g in gpu_ids:  # GPU port s -> switch plane s; switch port g -> GPU g
            for s in range(planes):
                b.channel(g, sw[s], lanes[s])
    elif kind == "xbar":
        sw = b.node(pb.NODE_SWITCH, "sw0")
        for g in gpu_ids:
            b.channel(g, sw, 1)
    else:  # fat_tree: leaves of gpus_per_leaf GPUs, every leaf linked to every spine
        per_leaf = _positive_int(system.gpus_per_leaf, "system.gpus_per_leaf")
        if gpus % per_leaf:
            raise ConfigError("system.gpus_per_leaf", f"must divide system.gpus={gpus}")
        leaves = gpus // per_leaf
        gpu_lanes = sum(system.lanes_per_switch)
        up = _positive_int(system.uplink_lanes, "system.uplink_lanes")
        if isinstance(system.spines, bool) or not isinstance(system.spines, int) or system.spines < 0:
            raise ConfigError("system.spines", f"must be 0 (as many as the leaves' uplinks need) or a positive "
                              f"integer, got {system.spines!r}")
        spines = system.spines or max(1, -(-per_leaf * gpu_lanes // up))
        built = spines if leaves > 1 else 0
        _check_size(gpus + leaves + built, gpus + leaves * built, "system.spines")
        leaf_ids = [b.node(pb.NODE_SWITCH, f"leaf{l}") for l in range(leaves)]
        spine_ids = [b.node(pb.NODE_SWITCH, f"spine{s}") for s in range(spines)] if leaves > 1 else []
        for g in gpu_ids:
            b.channel(g, leaf_ids[g // per_leaf], gpu_lanes)
        for leaf in leaf_ids:
            for spine in spine_ids:
                b.channel(leaf, spine, up)
    return b.done()


def min_link_latency_ps(topo) -> int:
    return min(l.latency_ps for l in topo.links)
