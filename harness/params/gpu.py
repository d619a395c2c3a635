"""Parameters of the Hopper GPU engine (``host.gpu_model: hopper``), keys ``gpu.<field>``.

Defaults describe one H100 SXM5 80 GB (132 SMs). The half-scale system of the CAIS paper
(Sec IV-B) is the same GPU with ``gpu.num_sms: 66``. The fields between the CALIBRATED markers
are fitted once, for all kernel shapes together, by ``scripts/calibrate_gpu.py`` against the
measured cuBLAS/PyTorch kernels in ``harness/data/measured/h100_kernels.csv``; the script
rewrites them and records its command and error in ``harness/data/calibration/h100.json``.

Sources of the fixed values: NVIDIA H100 Tensor Core GPU Architecture whitepaper (SM counts,
4096 dense FP16/BF16 tensor FLOP per clock per SM = 989 TFLOPS at 1830 MHz x 132 SMs, 50 MB
L2, 3.35 TB/s HBM3, 228 KB shared memory per SM, 64K registers, 2048 threads, 32 blocks);
Chips and Cheese "Nvidia's H100: Funny L2, and Tons of Bandwidth" (2023) for L2 bandwidth
(~5.5 TB/s) and latencies (L2 ~260 cycles, HBM ~480-500 ns).

``ACCEL_SIM_ALIASES`` maps Accel-Sim / GPGPU-Sim option names to these fields, and
:func:`from_accelsim` reads a ``gpgpusim.config`` so users can bring their Accel-Sim config.
"""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from pathlib import Path


@dataclass
class GpuParams:
    """One Hopper GPU: SMs, tensor cores, L2, HBM, thread-block scheduler, NVLink hub."""

    num_sms: int = 132
    """Streaming multiprocessors (66 for the paper's half-scale system)."""
    clock_mhz: float = 0.0
    """SM clock (MHz). 0: power-aware, the clock the GPU settles at under power_limit_w with all
    num_sms SMs running tensor-core kernels (harness/gpu/power.py; an H100 at 700 W: 1395 MHz on
    132 SMs, 1815 on 66, 1980 on 33); the run reports it (stat gpu.clock_mhz). > 0: this fixed clock
    (validation runs of a known clock)."""
    clock_mhz_without_mma: float = 0.0
    """SM clock (MHz) while no kernel with mma instructions runs on the GPU; 0: clock_mhz. The
    clock follows the load at kernel boundaries (a power limit binds under tensor-core load, a
    memory-bound kernel's power stays far below it); experiment=validate_concurrent sets it to the
    memory-bound burst clock (harness/gpu/power.py)."""
    max_clock_mhz: float = 1980.0
    """Maximum boost SM clock (H100 SXM5: 1980 MHz, nvidia-smi clocks.max.sm)."""
    power_limit_w: float = 700.0
    """Board power limit the clock is throttled to (H100 SXM5: 700 W, NVML enforced limit)."""
    power_burst_limit_w: float = 802.2
    """Board power a burst shorter than the power controller's settling (tens of ms) is held
    under, within microseconds, while NVML still reads the maximum clock: the burst clock
    (harness/gpu/power.py burst_clock_mhz; experiment=validate_concurrent). Fitted on the SM
    clocks of GEMM bursts on an H200 (scripts/fit_burst_power.py, h200_burst_clock.csv)."""
    # BEGIN POWER (scripts/fit_power.py --write rewrites these from harness/data/measured/h100_power.csv)
    power_static_w: float = 517.1
    """Board power not proportional to busy SMs under load: idle, HBM, L2, fabric (W; fitted)."""
    power_tensor_w_per_sm: float = 3.413
    """Dynamic power of one SM running tensor-core kernels at max_clock_mhz (W; fitted); scales
    with f V(f)^2."""
    power_memory_w: float = 19.08
    """Dynamic power of a memory-bound kernel at max_clock_mhz beyond power_static_w, whole GPU (W;
    fitted; such kernels stay at the maximum clock)."""
    power_voltage_floor: float = 0.1772
    """V(0) / V(max_clock) of the linear voltage-frequency curve V(f) (fitted)."""
    # END POWER
    tc_flops_per_cycle_per_sm: int = 4096
    """Dense FP16/BF16 tensor-core FLOP per clock per SM (FP8 x2, FP32/TF32 x0.5)."""
    alu_flops_per_cycle_per_sm: int = 256
    """FP32 CUDA-core FLOP per clock per SM (128 lanes x FMA), used by ``alu``."""
    max_blocks_per_sm: int = 32
    """Resident thread blocks per SM."""
    max_threads_per_sm: int = 2048
    """Resident threads per SM."""
    regs_per_sm: int = 65536
    """32-bit registers per SM."""
    smem_per_sm_kb: float = 228.0
    """Shared memory per SM available to blocks (KB)."""
    l1_smem_per_sm_kb: float = 256.0
    """Combined L1 data cache and shared memory of one SM (KB; H100: 256, NVIDIA's Hopper tuning
    guide). What the SM's shared-memory configuration leaves of it is the L1 that stages the
    lines of register loads in flight (isa.proto Kernel.loads_via_l1): at the largest
    configuration, 28 KB (docs/MEASUREMENTS.md, "One SM's streaming loads")."""
    smem_configs_kb: list[float] = field(default_factory=lambda: [0, 8, 16, 32, 64, 100, 132, 164, 196, 228])
    """Shared-memory configurations (carveouts) an SM can take (KB; compute capability 9.0, CUDA C++
    Programming Guide): an SM takes the smallest that holds its resident blocks' shared memory,
    when its first block is placed."""
    l2_size_mb: float = 50.0
    """L2 capacity; tiles loaded within a kernel stay resident up to this many bytes (FIFO)."""
    l2_latency_ns: float = 150.0
    """L2 hit latency."""
    sm_load_bytes_per_cycle: float = 116.0
    """Bytes one SM's port to L2 carries per SM clock towards the SM (loads): 228.8 GB/s at
    1980 MHz, the most an H100 SM loaded (docs/MEASUREMENTS.md, "One SM's port by direction")."""
    sm_store_bytes_per_cycle: float = 32.0
    """Bytes the same port carries per SM clock from the SM (stores): 63.9 GB/s at 1980 MHz
    whatever the CTAs. The two directions are one resource (a copy moves 1 / (1 / 116 + 1 / 32)
    = 25 B per clock each way; measured 48-49 GB/s, 24.5)."""
    warp_load_bytes_per_cycle: float = 12.4
    """Bytes per SM clock at which one warp's register loads return after their latency (24.5
    GB/s at 1980 MHz, from L2 as from HBM; docs/MEASUREMENTS.md, "A warp's loads", call 42): a
    round of a kernel with loads_via_l1 is its warps cycling through that delay and the SM's
    port, where they queue (external/gpu/include/cais/gpu/local_memory.h, warp_round_end)."""
    hbm_bw_gbps: float = 3350.0
    """HBM3 peak bandwidth (GB/s); scaled by hbm_efficiency."""
    # HBM latency, measured (harness/gpu/hbm_curve.py derives these from
    # harness/data/measured/h100_loaded_latency.csv; tests check that they agree).
    hbm_latency_ns: float = 204.6
    """What an L2 miss served by HBM adds to the L2 hit latency on an idle GPU: one SM's
    pointer chase through HBM (344.0 ns per hop) minus the same through L2 (139.4 ns), H100 SXM."""
    hbm_efficiency: float = 0.864
    """Fraction of hbm_bw_gbps HBM serves at most: 2895 GB/s of reads and writes while 96 SMs copy
    (h100_loaded_latency.csv; reads alone reach 3107 GB/s, 0.927)."""
    hbm_load_util: list[float] = field(default_factory=lambda: [
        0.0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85,
        0.9, 0.95])
    """HBM utilisation (bytes served per second over hbm_bw_gbps) of the loaded-latency curve's points."""
    hbm_load_read_ns: list[float] = field(default_factory=lambda: [
        0.0, 1.3, 1.3, 1.3, 1.3, 2.0, 4.4, 6.9, 11.5, 16.0, 23.4, 31.0, 38.5, 49.0, 65.8, 82.5, 126.8, 177.4,
        289.1, 413.7])
    """Latency an HBM read adds to hbm_latency_ns at each utilisation when the traffic is reads:
    the chase while 1-131 other SMs stream reads (scripts/measure/measure_loaded_latency.py)."""
    hbm_load_copy_ns: list[float] = field(default_factory=lambda: [
        0.0, 8.2, 16.6, 29.7, 44.5, 61.8, 79.2, 95.3, 108.9, 122.5, 139.0, 157.3, 183.0, 223.7, 264.5, 369.2,
        534.2, 717.8, 770.1, 770.1])
    """The same when half the traffic is writes (the other SMs copy); the engine blends the two
    curves by the write share of the traffic (capped at one half)."""
    hbm_load_window_ns: float = 1000.0
    """Window of the engine's HBM utilisation (an exponentially weighted average of the bytes it
    reserves on HBM): a few idle latencies, so a burst raises the latency of the loads queued
    behind it and not of loads a microsecond later. Not measured; docs/VALIDATION.md gives the
    sensitivity."""
    max_outstanding_per_sm: int = 256
    """Remote (NVLink) requests one SM keeps in flight before it stalls: loads (ld.remote,
    ld.cais, multimem.ld_reduce) and flag writes, and stores too when posted_stores is false."""
    posted_stores: bool = True
    """SM stores to NVLink (st.remote, multimem.st, multimem.red) are posted: they hold none of the
    max_outstanding_per_sm slots. An SM's store line enters its NVLink port only while the port's
    request VCs have credits for it beyond the store flits already waiting there (credit back-pressure
    from the network, net.vc_depth_flits); otherwise the SM waits for credits. Their acks still
    complete the instruction (a `wait` on it, NCCL's fence) and are counted. Basis: one CTA writes
    42-44 GB/s to a peer GPU (harness/data/measured/h200x2_p2p_ctas.csv, docs/MEASUREMENTS.md
    "NVLink writes from N CTAs"), above the ~27 GB/s that 256 slots per ~1.2 us round trip
    allow, and 8 CTAs fill the link. false: stores hold a slot until acked."""
    cache_remote_reads: bool = True
    """Remote read-only tiles (ld.remote, ld.cais) stay in the requester's L2 within a launch
    (spec A7: RTWICE-style caching, which LADM and the CAIS paper's AG-GEMM assume): a block
    loading a tile another block of its GPU fetched hits L2, and one still in flight is joined
    (an MSHR merge), so every GPU fetches each remote tile once per kernel while L2 (l2_size_mb,
    FIFO) holds it. Tiles are keyed by launch: nothing read in one kernel is hit in a later one.
    false: every load goes to the peer (or the switch)."""
    dma_max_outstanding: int = 4096
    """Remote requests the copy engine keeps in flight. A copy-engine peer copy on an HGX H100
    reaches 380 GB/s one way (p2pBandwidthLatencyTest, which uses the copy engines: NVIDIA/nccl
    issue #1264); at the engine's ~1.2 us remote round trip that needs 380 GB/s x 1.2 us / 128 B
    ~ 3600 requests in flight, so 4096 (512 capped a copy at ~56 GB/s)."""
    max_packet_bytes: int = 128
    """Largest NVLink packet payload; 32 B sectors of one line coalesce into one packet. A
    multiple of 32 from 32 to 2048 (the engine's 64-sector mask)."""
    bulk_lines: int = 8
    """Lines one simulated packet carries (1 to 16): a bulk packet of N lines has the wire flits
    of N packets (N headers), occupies the link for their serialisation time and counts as N in
    every statistic; its lines are those of one op that hash to one plane, so every packet goes
    where its single-line packets would. Bytes are exact; timing is approximate within a bulk.
    8: LLaMA-7B L1 layer times within 1.2 % of one packet per line at 7-13x less CPU
    (docs/PERFORMANCE.md, "Bulk packets", has the convergence as N -> 1); 1 = one packet per
    line, what the validation experiments use (conf/experiment/validate_*.yaml). An upper bound:
    where N-line bulks would leave a class's VCs short of its credit loop (traffic control's
    reduction VCs at N = 8), the GPU uses the largest N that does not (stat gpuN.bulk_lines)."""
    # Cross-GPU drift sources (docs/DRIFT.md). Each is drawn per (seed, GPU, launch, block) by
    # the engine (external/gpu drift.h), so runs stay deterministic and partition invariant and
    # scaling one source leaves the others' draws alone. Measured on one lent H100 by
    # scripts/measure/measure_drift_sources.py (harness/data/measured/h100_drift_sources.csv).
    launch_skew_ns: float = 12400.0
    """Host launch skew across GPUs: a delay drawn uniformly from [0, x) once per GPU (seeded) and
    added to every launch the host enqueues there (no device predecessor), so a GPU's launches
    shift together and keep their order. Measured: the launch-to-first-block latency of an
    idle H100 launched from Python (CuPy) varies with a std of 3.57 us over 2000 launches
    (launch_jitter_std_ns, detrended); a uniform [0, x) has that std at x = 3.57 x sqrt(12)."""
    block_jitter_frac: float = 0.009
    """Relative standard deviation of each block's compute time (seeded per block). Measured: the
    per-block duration CV of a tiled GEMM at one block per SM is 0.91 % (block_cv_occ1); at 8
    blocks per SM it is 5.65 %, but that includes co-resident blocks sharing the SM, which the
    engine models itself."""
    tb_order_window: int = 1
    """Blocks leave raster dispatch order by fewer than this many places (1: raster order; the
    engine already gives the next block to whichever SM frees first). Measured: at one block per
    SM no block of a tiled GEMM started after a block of higher index (order_overtaken_occ1 = 0);
    at 8 blocks per SM 6.6 % did, by up to 17 places (docs/DRIFT.md varies it up to 36)."""
    clock_spread_frac: float = 0.037
    """Relative standard deviation of the per-GPU SM clock: each GPU runs at clock_mhz x (1 + x N(0,1)),
    drawn per (seed, GPU), clamped to [0.5, 1.5]. Measured: the SM clock of one H100 under
    back-to-back GEMMs at its 700 W cap wanders 1215-1485 MHz with a CV of 3.7 % (sm_clock_cv);
    for same-SKU GPUs Sinha et al., "Not All GPUs Are Created Equal" (SC'22), report 8 % (max 22 %)
    average performance variation."""
    max_clusters_4: int = 30
    """Thread-block clusters of 4 CTAs the GPU holds at once (a cluster of 8 takes two): what
    cuOccupancyMaxActiveClusters reports for 1-CTA-per-SM kernels, 30 on the whole H100 and 8 in
    driver-made partitions of 64-72 SMs (harness/data/measured/h100_partitions_clusters.csv).
    2-CTA clusters pair up on every partition measured, so they are not limited. 0: no limit."""
    # BEGIN CALIBRATED (scripts/calibrate_gpu.py rewrites this block)
    l2_bw_gbps: float = 11139.5
    """L2 bandwidth shared by all SMs, GB/s (fitted; microbenchmarks report ~5.5-7 TB/s)."""
    tc_efficiency: float = 1.0000
    """Fraction of peak tensor-core rate an mma reaches inside a K loop (fitted)."""
    alu_efficiency: float = 0.6083
    """Fraction of alu_flops_per_cycle_per_sm an ALU instruction stream reaches: ALU work is counted
    as 2 x the SASS instructions per element (layernorm) and the SMs issue in order, so dependency
    stalls the resident warps do not hide cost issue slots (fitted)."""
    tb_overhead_ns: float = 0.0
    """Fixed cost of one thread block: dispatch, prologue, epilogue (fitted)."""
    kernel_launch_ns: float = 5629.4
    """From launch to first block dispatch, and between kernels of one stream (fitted)."""
    # END CALIBRATED


GROUPS = {"gpu": GpuParams}

# Accel-Sim / GPGPU-Sim option -> (field, how to convert the option's value).
ACCEL_SIM_ALIASES = {
    "gpgpu_n_clusters": ("num_sms", int),  # with gpgpu_n_cores_per_cluster 1 (Accel-Sim's H100 config)
    "gpgpu_clock_domains": ("clock_mhz", lambda v: float(str(v).split(":")[0])),
    "gpgpu_shader_cta": ("max_blocks_per_sm", int),
    "gpgpu_shader_core_pipeline": ("max_threads_per_sm", lambda v: int(str(v).split(":")[0])),
    "gpgpu_shader_registers": ("regs_per_sm", int),
    "gpgpu_shmem_size": ("smem_per_sm_kb", lambda v: int(v) / 1024.0),
    "gpgpu_shmem_per_block": (None, None),  # per-block limit: taken from the kernel instead
    "gpgpu_unified_l1d_size": ("l1_smem_per_sm_kb", float),  # KB of L1 + shared memory
    "gpgpu_shmem_option": ("smem_configs_kb", lambda v: [float(x) for x in str(v).split(",") if x]),  # KB
}


def from_accelsim(text: str) -> dict[str, object]:
    """``gpu.<field>`` overrides from an Accel-Sim ``gpgpusim.config`` (options we model)."""
    out: dict[str, object] = {}
    clusters, cores = None, 1
    for line in text.splitlines():
        line = line.split("#")[0].strip()
        m = re.match(r"-(\w+)\s+(\S+)", line)
        if not m:
            continue
        key, value = m.group(1), m.group(2)
        if key == "gpgpu_n_cores_per_cluster":
            cores = int(value)
            continue
        if key == "gpgpu_n_clusters":
            clusters = int(value)
            continue
        alias = ACCEL_SIM_ALIASES.get(key)
        if alias and alias[0]:
            out[f"gpu.{alias[0]}"] = alias[1](value)
    if clusters is not None:
        out["gpu.num_sms"] = clusters * cores
    return out


def defaults() -> dict[str, object]:
    """Flat ``gpu.*`` keys with their default values (what a standalone run sends)."""
    return {f"gpu.{k}": v for k, v in asdict(GpuParams()).items()}


CALIBRATION_FILE = Path(__file__).resolve().parents[1] / "data" / "calibration" / "h100.json"
