#include "cais/gpu/hopper_config.h"

#include <cmath>
#include <string>

#include "cais/errors.h"
#include "cais/packet.h"

namespace cais::gpu {

namespace {

// gpu.hbm_load_util / _read_ns / _copy_ns: one curve, utilisation rising, latencies >= 0.
void read_loaded_latency(const Params& p, HopperConfig& c) {
  c.hbm_load_util = p.get_double_list("gpu.hbm_load_util");
  const auto read = p.get_double_list("gpu.hbm_load_read_ns");
  const auto copy = p.get_double_list("gpu.hbm_load_copy_ns");
  const std::size_t n = c.hbm_load_util.size();
  if (n == 0) throw ConfigError("gpu.hbm_load_util", "needs at least one point");
  if (read.size() != n || copy.size() != n)
    throw ConfigError("gpu.hbm_load_read_ns", "gpu.hbm_load_util, _read_ns and _copy_ns need one value per point (" +
                                                  std::to_string(n) + " utilisations, " + std::to_string(read.size()) +
                                                  " read and " + std::to_string(copy.size()) + " copy latencies)");
  for (std::size_t i = 0; i < n; ++i) {
    if (c.hbm_load_util[i] < 0 || (i && c.hbm_load_util[i] <= c.hbm_load_util[i - 1]))
      throw ConfigError("gpu.hbm_load_util", "must be >= 0 and strictly rising");
    if (read[i] < 0 || copy[i] < 0) throw ConfigError("gpu.hbm_load_read_ns", "latencies must be >= 0 ns (gpu.hbm_load_read_ns, gpu.hbm_load_copy_ns)");
    c.hbm_load_read_ps.push_back(read[i] * 1000.0);
    c.hbm_load_copy_ps.push_back(copy[i] * 1000.0);
  }
  c.hbm_load_window_ps = p.get_time_ps("gpu.hbm_load_window_ns", 1);
}

// gpu.l1_smem_per_sm_kb and gpu.smem_configs_kb: rising configurations, the largest holding
// gpu.smem_per_sm_kb and within the combined L1 + shared memory.
void read_smem_configs(const Params& p, HopperConfig& c) {
  c.l1_smem_per_sm = static_cast<std::uint64_t>(p.get_positive("gpu.l1_smem_per_sm_kb") * 1024.0);
  for (const double kb : p.get_double_list("gpu.smem_configs_kb")) {
    const auto bytes = static_cast<std::uint64_t>(kb * 1024.0);
    if (kb < 0 || (!c.smem_configs.empty() && bytes <= c.smem_configs.back()))
      throw ConfigError("gpu.smem_configs_kb", "must be >= 0 and strictly rising");
    c.smem_configs.push_back(bytes);
  }
  if (c.smem_configs.empty() || c.smem_configs.back() < c.smem_per_sm)
    throw ConfigError("gpu.smem_configs_kb", "needs a largest configuration that holds gpu.smem_per_sm_kb");
  if (c.smem_configs.back() > c.l1_smem_per_sm)
    throw ConfigError("gpu.l1_smem_per_sm_kb", "must hold the largest shared-memory configuration (gpu.smem_configs_kb)");
}

}  // namespace

HopperConfig HopperConfig::from_params(const Params& p) {
  HopperConfig c;
  c.num_sms = static_cast<std::uint32_t>(p.get_uint("gpu.num_sms"));
  if (c.num_sms == 0) throw ConfigError("gpu.num_sms", "must be >= 1");
  c.clock_ghz = p.get_positive("gpu.clock_mhz") / 1000.0;
  const double without_mma = p.get_double("gpu.clock_mhz_without_mma");
  if (without_mma < 0) throw ConfigError("gpu.clock_mhz_without_mma", "must be >= 0 (0: gpu.clock_mhz)");
  c.clock_ghz_without_mma = without_mma > 0 ? without_mma / 1000.0 : c.clock_ghz;
  c.tc_flops_per_cycle = p.get_positive("gpu.tc_flops_per_cycle_per_sm");
  c.alu_flops_per_cycle = p.get_positive("gpu.alu_flops_per_cycle_per_sm");
  c.tc_efficiency = p.get_positive("gpu.tc_efficiency");
  if (c.tc_efficiency > 1) throw ConfigError("gpu.tc_efficiency", "must be in (0, 1]");
  c.alu_efficiency = p.get_positive("gpu.alu_efficiency");
  if (c.alu_efficiency > 1) throw ConfigError("gpu.alu_efficiency", "must be in (0, 1]");
  c.max_blocks_per_sm = static_cast<std::uint32_t>(p.get_uint("gpu.max_blocks_per_sm"));
  c.max_threads_per_sm = static_cast<std::uint32_t>(p.get_uint("gpu.max_threads_per_sm"));
  c.regs_per_sm = static_cast<std::uint32_t>(p.get_uint("gpu.regs_per_sm"));
  c.smem_per_sm = static_cast<std::uint64_t>(p.get_positive("gpu.smem_per_sm_kb") * 1024.0);
  read_smem_configs(p, c);
  c.l2_bytes = static_cast<std::uint64_t>(p.get_positive("gpu.l2_size_mb") * 1024.0 * 1024.0);
  c.l2_bytes_per_ps = p.get_positive("gpu.l2_bw_gbps") / 1000.0;
  c.l2_latency_ps = p.get_time_ps("gpu.l2_latency_ns");
  c.sm_load_bytes_per_ps = p.get_positive("gpu.sm_load_bytes_per_cycle") * c.clock_ghz / 1000.0;
  c.sm_store_bytes_per_ps = p.get_positive("gpu.sm_store_bytes_per_cycle") * c.clock_ghz / 1000.0;
  c.warp_load_bytes_per_ps = p.get_positive("gpu.warp_load_bytes_per_cycle") * c.clock_ghz / 1000.0;
  const double hbm_eff = p.get_positive("gpu.hbm_efficiency");
  if (hbm_eff > 1) throw ConfigError("gpu.hbm_efficiency", "must be in (0, 1]");
  c.hbm_bytes_per_ps = p.get_positive("gpu.hbm_bw_gbps") * hbm_eff / 1000.0;
  c.hbm_latency_ps = p.get_time_ps("gpu.hbm_latency_ns");
  c.hbm_peak_bytes_per_ps = p.get_positive("gpu.hbm_bw_gbps") / 1000.0;
  read_loaded_latency(p, c);
  c.max_outstanding_per_sm = static_cast<std::uint32_t>(p.get_uint("gpu.max_outstanding_per_sm"));
  c.dma_max_outstanding = static_cast<std::uint32_t>(p.get_uint("gpu.dma_max_outstanding"));
  if (c.max_outstanding_per_sm == 0) throw ConfigError("gpu.max_outstanding_per_sm", "must be >= 1");
  if (c.dma_max_outstanding == 0) throw ConfigError("gpu.dma_max_outstanding", "must be >= 1");
  c.posted_stores = p.get_bool("gpu.posted_stores");
  c.cache_remote_reads = p.get_bool("gpu.cache_remote_reads");
  c.max_packet_bytes = static_cast<std::uint32_t>(p.get_uint("gpu.max_packet_bytes"));
  // A packet's sectors are one 64-bit mask in the packetizer: at most 64 sectors of 32 B.
  if (c.max_packet_bytes < 32 || c.max_packet_bytes % 32 != 0 || c.max_packet_bytes > 64 * 32)
    throw ConfigError("gpu.max_packet_bytes", "is " + std::to_string(c.max_packet_bytes) +
                                                  "; allowed: a multiple of the 32 B sector from 32 to 2048");
  c.bulk_lines = static_cast<std::uint32_t>(p.get_uint("gpu.bulk_lines"));
  if (c.bulk_lines < 1 || c.bulk_lines > kMaxBulkLines)
    throw ConfigError("gpu.bulk_lines", "is " + std::to_string(c.bulk_lines) + "; allowed: 1 to " +
                                            std::to_string(kMaxBulkLines));
  const double skew = p.get_double("gpu.launch_skew_ns");
  if (skew < 0) throw ConfigError("gpu.launch_skew_ns", "must be >= 0");
  c.launch_skew_ps = ns_to_ps(skew);
  c.block_jitter_frac = p.get_double("gpu.block_jitter_frac");
  if (c.block_jitter_frac < 0 || c.block_jitter_frac > 0.5)
    throw ConfigError("gpu.block_jitter_frac", "must be in [0, 0.5]");
  const double window = p.get_double("gpu.tb_order_window");
  if (window < 1 || window != std::floor(window))
    throw ConfigError("gpu.tb_order_window", "must be a whole number >= 1 (1: raster order), got " + std::to_string(window));
  c.tb_order_window = static_cast<std::uint32_t>(window);
  c.clock_spread_frac = p.get_double("gpu.clock_spread_frac");
  if (c.clock_spread_frac < 0 || c.clock_spread_frac > 0.2)
    throw ConfigError("gpu.clock_spread_frac", "must be in [0, 0.2]");
  c.tb_overhead_ps = p.get_time_ps("gpu.tb_overhead_ns");
  c.kernel_launch_ps = p.get_time_ps("gpu.kernel_launch_ns");
  c.max_clusters_4 = static_cast<std::uint32_t>(p.get_uint("gpu.max_clusters_4"));
  // The cap is the merge unit's protocol as much as the GPU's: the switches ack red.cais only
  // when it is on (feature_cais_merge.h), so both ends read the same key.
  if (p.has("net.cais_merge.outstanding_cap") && p.get_bool("net.cais_merge.outstanding_cap")) {
    const std::string features = p.has("net.features") ? p.get_string("net.features") : "";
    if (features.find("cais_merge") == std::string::npos)
      throw ConfigError("net.cais_merge.outstanding_cap", "needs the switches' merge unit (cais_merge in net.features, "
                                                          "now '" + features + "'): it acks the red.cais lines");
    const double kb = p.get_positive("net.cais_merge.outstanding_cap_kb");
    const double lines = std::floor(kb * 1024.0 / c.max_packet_bytes);
    if (lines < 1 || lines > 1e9)
      throw ConfigError("net.cais_merge.outstanding_cap_kb", "is " + std::to_string(kb) + "; allowed: from one " +
                                                                 std::to_string(c.max_packet_bytes) +
                                                                 " B line (gpu.max_packet_bytes) to 1e9 lines");
    c.mergeable_cap_lines = static_cast<std::uint32_t>(lines);
  }
  return c;
}

}  // namespace cais::gpu
