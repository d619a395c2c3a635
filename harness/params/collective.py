"""Parameters of the GPU model ``collective`` (external/net/src/nccl_collective_model.h): one NCCL-like
collective executed as packet traffic through the switches.

Structural values follow NCCL 2.18-2.28 (src/include/collectives.h, src/device/*.h); the one
fitted constant, ``cta_bw_gbps``, is fitted once on a subset of the H200 measurements and
validated on the rest (docs/VALIDATION.md, "Collectives vs NCCL").
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass
class CollectiveParams:
    """GPU model ``collective``: ring all_reduce / all_gather / reduce_scatter (Simple protocol)
    and NVLS all_reduce (one- and two-shot)."""

    op: str = "all_reduce"
    """all_reduce | all_gather | reduce_scatter."""
    algo: str = "ring"
    """ring | nvls (nvls: all_reduce only)."""
    bytes: int = 64 * 2**20
    """Message size as nccl-tests counts it: per-rank buffer (all_reduce), total output
    (all_gather), total input (reduce_scatter)."""
    channels: int = 24
    """Ring channels (one CTA each). 24: what NCCL 2.28.9 chose on the H200 x2/x4 machines
    (NCCL INIT log, docs/MEASUREMENTS.md)."""
    nvls_channels: int = 16
    """NVLS channels (NCCL_NVLS_NCHANNELS default 16 on Hopper)."""
    chunk_bytes: int = 2 * 2**20
    """Ring chunk per rank-block per channel and loop: NCCL_BUFFSIZE 4 MiB / NCCL_STEPS 8 x
    ALLREDUCE_CHUNKSTEPS 4 = 2 MiB (NCCL defaults; the last loop uses smaller blocks)."""
    slices_per_chunk: int = 2
    """Slices per primitive: CHUNKSTEPS / SLICESTEPS = 4 / 2 (NCCL)."""
    buffer_slices: int = 4
    """Slices a sender may have in the receiver's buffer: NCCL_STEPS / SLICESTEPS = 8 / 2."""
    nvls_chunk_bytes: int = 128 * 2**10
    """NVLS chunk per head rank and loop (NCCL's NVLS chunk size, 128 KiB)."""
    nvls_outstanding_bytes: int = 10240
    """multimem.ld_reduce bytes in flight per NVLS channel: the reduce warps' memory-level
    parallelism, 5 warps x 32 threads x 16 B x unroll 4 (NCCL all_reduce.h, NVLS, nranks > 6)."""
    packet_bytes: int = 128
    """Payload of one NVLink packet (bytes)."""
    packet_multiple: int = 1
    """Bulk packets: N consecutive packets simulated as one (same wire bytes, N headers);
    1 = every 128 B packet simulated. Results converge as N -> 1 (test_nccl_collective_model.cc)."""
    functional: bool = False
    """Packets carry values; every rank checks its output (small sizes only)."""
    start_ns: float = 7600.0
    """When the collective's first packet may leave (all ranks together), ns: the kernel launch
    and NCCL setup latency the packet model does not otherwise contain. Calibration parameter,
    fitted once on the six measured H200 ring rows of 1 MiB (not in the validation set): mean of
    measured - simulated time there (9.7, 9.4, 8.6, 5.0, 7.4, 5.5 us) = 7.6 us."""
    kernel_overhead_ns: float = 0.0
    """Ring only: time NCCL's kernel spends beyond the protocol's copies, flags and fences, added
    to ``start_ns``. Measured on 2 x H200 as NCCL's all_gather time minus that of the same
    protocol run by scripts/measure/measure_ring_trace.py (both timed back to back): 1.6 us at
    1 MiB, growing to about 19 us from 32 MiB on (docs/MEASUREMENTS.md call 25); its mechanism
    is unknown. 0: not modelled; conf/calibration/nccl228_h200.yaml sets 19 us, the value for
    messages >= 32 MiB."""
    cta_bw_gbps: float = 32.0
    """Calibration parameter: bytes per second one NCCL channel (one CTA) moves through a
    primitive (load + remote store, or copy-out), GB/s; 0 = unlimited. Fitted once on the six
    measured H200 ring rows of 256 MiB (2 and 4 GPUs x all_reduce/all_gather/reduce_scatter;
    ``python -m harness.experiments.validate_collectives --fit 30,32,33,34,36``: mean |busbw
    error| 2.45/2.30/2.57/2.91/3.82 %, 32 chosen) and validated on every other row."""
    cta_copy_gbps: float = 0.0
    """A CTA's rate in send and recv (1 load, 1 store per element), GB/s; 0: cta_bw_gbps."""
    cta_copy_send_gbps: float = 0.0
    """... in copySend and recvCopySend (1 load, 2 stores); 0: cta_bw_gbps."""
    cta_reduce_gbps: float = 0.0
    """... in recvReduceSend and recvReduceCopy (2 loads, 1 store); 0: cta_bw_gbps."""
    cta_reduce_send_gbps: float = 0.0
    """... in recvReduceCopySend (2 loads, 2 stores); 0: cta_bw_gbps. Measured on H200 for all
    four (24 CTAs of 480 threads walking 1 MiB slices, docs/MEASUREMENTS.md call 12): 38.7, 26.1,
    30.3, 22.8."""

    writes_per_response: int = 1
    """NVLink writes acknowledged by one write-response packet (one header flit). 1: the ring
    ceiling when both directions carry data is 128/160 of the link (360 of 450 GB/s); 2: 128/152
    (379 GB/s), above the 366-367 GB/s NCCL measures on 4 and 8 H200s."""


GROUPS = {"collective": CollectiveParams}
