// Hopper GPU configuration, read once from the flat parameter map (keys gpu.*; no defaults here:
// they are declared in harness/params/gpu.py).
#pragma once
#include <cstdint>
#include <vector>

#include "cais/params.h"
#include "cais/time.h"

namespace cais::gpu {

struct HopperConfig {
  std::uint32_t num_sms = 0;
  double clock_ghz = 0;
  // SM clock while no kernel with mma instructions runs (gpu.clock_mhz_without_mma; 0 there:
  // clock_ghz): a GPU's power limit binds only under tensor-core load (TbScheduler::set_clock).
  double clock_ghz_without_mma = 0;
  double tc_flops_per_cycle = 0;    // per SM, dense FP16/BF16, before efficiency
  double alu_flops_per_cycle = 0;   // per SM
  double tc_efficiency = 0;
  double alu_efficiency = 0;       // fraction of alu_flops_per_cycle an ALU instruction stream issues at
  std::uint32_t max_blocks_per_sm = 0, max_threads_per_sm = 0, regs_per_sm = 0;
  std::uint64_t smem_per_sm = 0;    // bytes
  std::uint64_t l1_smem_per_sm = 0;         // bytes of L1 + shared memory (gpu.l1_smem_per_sm_kb)
  std::vector<std::uint64_t> smem_configs;  // bytes, rising (gpu.smem_configs_kb)
  std::uint64_t l2_bytes = 0;
  double l2_bytes_per_ps = 0;       // whole GPU
  TimePs l2_latency_ps = 0;
  double sm_load_bytes_per_ps = 0;   // one SM's port to L2: loaded bytes,
  double sm_store_bytes_per_ps = 0;  // stored bytes (one resource: port_calendar.h)
  double warp_load_bytes_per_ps = 0; // one warp's loads returning (local_memory.h, warp_round_end)
  double hbm_bytes_per_ps = 0;      // effective (peak x efficiency)
  TimePs hbm_latency_ps = 0;        // idle: an L2 miss beyond the L2 hit latency
  // Loaded latency (hbm_load.h): extra ps of an HBM read at each utilisation (bytes served over
  // the peak), for read-only and for half-write traffic; the utilisation's averaging window.
  std::vector<double> hbm_load_util, hbm_load_read_ps, hbm_load_copy_ps;
  double hbm_peak_bytes_per_ps = 0;
  TimePs hbm_load_window_ps = 0;
  std::uint32_t max_outstanding_per_sm = 0, dma_max_outstanding = 0;
  // SM stores (st.remote, multimem.st/red) hold no load slot; the NVLink port's credits pace them.
  bool posted_stores = true;
  // Remote read-only tiles (ld.remote, ld.cais) kept in this GPU's L2 within a launch (remote_read_cache.h).
  bool cache_remote_reads = true;
  std::uint32_t max_packet_bytes = 0;
  std::uint32_t bulk_lines = 1;  // lines per bulk packet (cais/packet.h)
  TimePs launch_skew_ps = 0;
  double block_jitter_frac = 0;
  std::uint32_t tb_order_window = 1;  // blocks leave raster dispatch order by < this many places
  double clock_spread_frac = 0;       // relative std of the per-GPU SM clock (drift.h)
  TimePs tb_overhead_ps = 0;
  TimePs kernel_launch_ps = 0;
  std::uint32_t max_clusters_4 = 0;  // resident 4-CTA cluster slots (0: only the SMs limit clusters)
  // Outstanding mergeable lines (ld.cais, red.cais) one GPU may have, from
  // net.cais_merge.outstanding_cap / outstanding_cap_kb (spec 3.5 step 3.4); 0: no cap.
  std::uint32_t mergeable_cap_lines = 0;

  static HopperConfig from_params(const Params& p);
};

}  // namespace cais::gpu
