"""Parameters of the in-switch computing features (external/net/src/feature_*.cc).

A feature runs in a switch only when its name is listed in ``net.features`` (comma-separated,
e.g. ``"nvls,group_sync,cais_merge"``); the keys of a feature that is not enabled are sent but
ignored, so one simulation refuses them on its command line (harness/experiments/simulate.py).
The packet conventions the features rely on are documented in the headers
external/net/include/cais/net/feature_*.h.
"""
from __future__ import annotations

from dataclasses import dataclass

# The features' parameter sections, net.<name>: each is read only where net.features lists it.
FEATURES = ("nvls", "cais_merge", "group_sync")


def disabled_sections(features: str) -> tuple[str, ...]:
    """net.<feature> of every feature `features` (net.features) does not enable."""
    enabled = {f.strip() for f in str(features or "").split(",")}
    return tuple(f"net.{f}" for f in FEATURES if f not in enabled)


@dataclass
class NvlsParams:
    """Feature ``nvls``: NVLink SHARP multicast (multimem.st / multimem.red), in-switch
    reduction for multimem.ld_reduce, one completion ack per multicast, DMA-driven NVLS."""

    multicast_delay_ns: float = 2.0
    """Switch processing time to replicate a multicast request (or an ld_reduce's reads)."""
    reduce_delay_ns: float = 4.0
    """Reduction-ALU latency from the last member's read response to the ld_reduce answer."""
    member_acks: bool = False
    """True: every member answers its multicast copy with MM_ACK and the switch sends the
    issuer one MM_ACK when all are in (completion at memory, ack traffic modelled). False:
    members send nothing; the switch acks the issuer when the copies leave."""


@dataclass
class CaisMergeParams:
    """Feature ``cais_merge``: the CAIS merge unit (CAM lookup + merging table) with load and
    reduction merging, LRU eviction, timeouts and TB-aware request throttling (HPCA'26 CAIS,
    III-A2..4, III-B2). Defaults: the paper's 40 KB / 320-entry table per switch port.
    A CAIS request's ``aux`` is the number of GPUs that send one for the address (the TB
    group's GPUs other than the owner / home: P-1 when it is in the group); an entry completes
    when that many have merged."""

    table_bytes: int = 40960
    """Data capacity of one merging table in bytes (an entry holds one line: the bytes a load
    asks for, or a reduction's payload)."""
    table_entries: int = 320
    """CAM / merging-table entries of one table."""
    unlimited: bool = False
    """True: tables without a capacity bound (``table_bytes`` / ``table_entries`` ignored):
    nothing is evicted for space and nothing bypasses (timeouts still apply), and
    ``<switch>.cais_merge.port<P>.high_water_entries`` / ``high_water_bytes`` report the table
    size each port needed."""
    timeout_ns: float = 5000.0
    """An entry not accessed for this long is evicted (forward progress for requests that
    never come); must be > 0."""
    lookup_delay_ns: float = 2.0
    """CAM lookup and table update latency added to every packet the merge unit handles."""
    throttle: bool = False
    """Send THROTTLE feedback to GPUs that run ahead of their TB-group peers."""
    throttle_ahead_entries: int = 16
    """A GPU is throttled for a group when it has joined more than this many live entries of
    that group that still wait for its peers (per switch). Spec A16's theta_hi: 16 entries (2 KB)."""
    throttle_resume_entries: int = 8
    """The throttle is lifted when that count falls to this value or below (< ahead). Spec A16's
    theta_lo: 8 entries."""
    throttle_hold_ns: float = 2000.0
    """How long a THROTTLE asks the GPU to hold that group's mergeable requests at most (its
    ``aux``); lifted earlier (THROTTLE aux = 0) when the GPU's peers catch up, renewed as it runs
    out while a peer it waits for is free to catch up (docs/CONTRACTS.md, "Throttling"); > 0."""
    outstanding_cap: bool = False
    """The last part of request throttling (spec 3.5 step 3.4, paper V-C2): each GPU caps its
    outstanding mergeable lines (``ld.cais`` until its response, ``red.cais`` until the switch's
    CAIS_RED_ACK) at ``outstanding_cap_kb``, and the merge unit acks every ``red.cais`` line when
    it is done with it (merged sum forwarded, partial evicted or timed out, or bypassed). Read
    by the switches and the Hopper GPUs alike; the CAIS schemes set it from ``scheme.throttle``.
    False: ``red.cais`` is posted, no acks, no cap."""
    outstanding_cap_kb: float = 1280.0
    """The per-GPU cap of ``outstanding_cap`` in KB of ``gpu.max_packet_bytes`` lines: the
    paper's 10240 x 128 B = 1280 KB (spec A16; paper V-C2: "the total required merging table
    size is bounded by the outstanding remote requests from a single GPU"); > 0."""


@dataclass
class GroupSyncParams:
    """Feature ``group_sync``: the switch's group-sync table for CAIS TB-group pre-launch and
    pre-access synchronisation (SYNC_REQ counted per group, SYNC_RELEASE broadcast)."""

    process_delay_ns: float = 2.0
    """Table lookup latency from the completing SYNC_REQ to the releases leaving."""
    table_entries: int = 4096
    """Groups the table can track at once; more pending groups is an error (never silent)."""


GROUPS = {
    "net.nvls": NvlsParams,
    "net.cais_merge": CaisMergeParams,
    "net.group_sync": GroupSyncParams,
}
