"""Parameters of the network engine (external/net): the NVSwitch router model and the synthetic
(BookSim-style) terminals.

Link bandwidth and latency (250 ns GPU-switch links in the paper) are properties of the
topology (``system.*``), not of the router. Parameters of the in-switch features live in
harness/params/features.py (``net.nvls``, ``net.cais_merge``, ``net.group_sync``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional


@dataclass
class NetParams:
    """Router model ``nvswitch``: input-queued (plus an optional output queue, output_queue_flits),
    virtual channels with credit flow control, separable input-first allocation, cut-through
    forwarding (external/net/src/nvswitch.cc)."""

    vcs_per_port: int = 8
    """Virtual channels per input port (paper, IV-A: eight), per NVLink lane or per port as
    vc_buffer_scope says. Requests and responses use disjoint halves; traffic_control splits the
    request half into loads and reductions."""
    vc_depth_flits: int = 256
    """Buffer depth of one virtual channel, in flits (paper: 256-deep VCs), per NVLink lane or
    per port as vc_buffer_scope says."""
    vc_buffer_scope: str = "lane"
    """``lane``: vcs_per_port and vc_depth_flits are per NVLink lane, as in the paper (eight
    256-flit VCs per link). Every port of a system has the VCs of its narrowest link (a
    DGX-H100's 4-lane planes: 32) and each VC is as deep as a wider port needs to hold its
    lanes' buffering (a 5-lane port: 32 x 320 flits = 40 x 256); ``port``: both per port as
    given (BookSim's vcs and vc_buf_size; what experiments that set vc_depth_flits for a whole
    bundled port mean). docs/DESIGN_NOTES.md, "VC buffers"."""
    flit_bytes: int = 16
    """Flit size in bytes (NVLink: 16 B)."""
    header_flits: int = 1
    """Header flits per packet (NVLink: one); a 128 B payload packet is 1 + 8 = 9 flits."""
    routing_delay_ns: float = 1.0
    """Route computation stage (head flit), ns."""
    vc_alloc_delay_ns: float = 1.0
    """Virtual-channel allocation stage, ns."""
    sw_alloc_delay_ns: float = 1.0
    """Switch allocation stage, ns."""
    xbar_delay_ns: float = 1.0
    """Crossbar traversal (BookSim's st_final_delay), ns."""
    credit_delay_ns: float = 1.0
    """Delay before a freed buffer slot's credit leaves for the upstream sender (plus the reverse
    link's latency), ns."""
    sw_alloc_patience: int = 2
    """Lost switch arbitrations after which an input's arbiter moves on to its next ready VC
    (0: never). 2 reproduces BookSim2's flit-level separable input-first allocator at packet
    granularity (docs/VALIDATION.md, BookSim2 comparison)."""
    internal_speedup: int = 2
    """Crossbar cycles per flit time of the fastest link (``sw_alloc_granularity=flit``; BookSim2's
    ``internal_speedup``): the switch allocator runs that many times per flit time and an output
    takes flits while fewer than that many flit times of them wait for its link, so an input can
    send to two outputs in one flit time. 1: BookSim2's iq_router without speedup (BookSim configs
    run so); 2, the classic speedup at which an input-queued switch with output buffers works as
    an output-queued one: a ring on 4 or 8 GPUs, whose switch ports all carry data one way and
    acknowledgements the other at full load, keeps its links 100 % busy instead of 91.5 %
    (docs/VALIDATION.md, "ISA collectives"). NVSwitch's own is not public."""
    output_queue_flits: int = 0
    """Flits an output port may hold queued for its link beyond the packet on the wire (0: an
    output takes a packet only when its link is idle, BookSim's input-queued router). With a
    queue a granted input is busy only while its packet crosses the crossbar, so a small response
    waiting for an output that streams another input's data no longer holds that input's data
    for a free output (the packet-level stand-in for flit interleaving; docs/VALIDATION.md)."""
    sw_alloc_granularity: str = "flit"
    """``flit``: the switch is allocated per flit every router cycle while flits wait, as
    BookSim2's router is (hold_switch_for_packet = 0, the paper's simulator), so packets of
    different inputs interleave on an output (external/net/src/nvswitch_flit.cc; the switch of
    every validated figure, docs/VALIDATION.md); ``packet``: a granted packet holds its input and
    output until its tail has left, 1.2-2.3x less CPU on a layer but 16 % slow on an 8-GPU ring,
    whose outputs each take two inputs (docs/VALIDATION.md, "VCs per lane")."""
    traffic_control: bool = False
    """CAIS traffic control: separate VCs for loads (READ/CAIS_LD/MM_LD_REDUCE requests) and
    reductions (CAIS_RED/MM_RED/WRITE), served round-robin: the request half of the VCs splits
    into one quarter for loads and the rest for reductions; responses keep their half
    (docs/DESIGN_NOTES.md, "VC buffers")."""
    functional: bool = False
    """Packets carry payload values and GPUs keep them: a layer run then checks every collective's
    result on every GPU (harness/functional_check.py)."""
    features: str = ""
    """Enabled switch features, comma-separated, in call order (e.g. ``nvls,group_sync,cais_merge``)."""
    stats_bin_ns: float = 1000.0
    """Bin width of the per-link wire-byte time series, ns."""
    booksim_config: Optional[str] = None
    """experiment=net_synthetic: the BookSim-style config file to run (harness only)."""
    injection_rates: list[float] = field(default_factory=list)
    """experiment=net_synthetic: offered loads to sweep, in the file's injection_rate units
    (empty: the file's own injection_rate) (harness only)."""


@dataclass
class SyntheticParams:
    """GPU model ``synthetic``: BookSim-style traffic terminals (Bernoulli injection, unbounded
    source queue, line-rate sink). One cycle is one flit time on the terminal's link."""

    traffic: str = "uniform"
    """Destination pattern: uniform (every terminal, itself included), randperm, hotspot."""
    hotspot_nodes: list[int] = field(default_factory=list)
    """Destinations of hotspot traffic (terminal ids), chosen uniformly."""
    packet_flits: int = 9
    """Flits per packet, header included."""
    injection_rate_packets_per_cycle: float = 0.01
    """Bernoulli injection probability per terminal per cycle."""
    warmup_cycles: int = 30000
    """Cycles before measured packets are created."""
    measure_cycles: int = 100000
    """Measurement window: packets created in it are measured; accepted flits are counted in it."""
    max_drain_cycles: int = 520000
    """Sources stop creating packets this long after the window (the run then drains)."""


GROUPS = {"net": NetParams, "synthetic": SyntheticParams}
