// HBM's loaded latency: what an L2 miss waits beyond the idle latency rises with the traffic HBM
// serves, long before the bandwidth saturates (DRAM bank conflicts, read/write turnarounds), and
// more when part of that traffic is writes. The curve is measured, not fitted
// (scripts/measure/measure_loaded_latency.py: one SM's pointer chase while other SMs stream reads,
// or reads and writes; harness/data/measured/h100_loaded_latency.csv): extra latency against HBM
// utilisation (bytes served per second over the peak), for read-only and for copy (half writes)
// traffic. The engine tracks the utilisation as an exponentially weighted average of the bytes
// reserved on HBM over a window (gpu.hbm_load_window_ns) and interpolates between the two curves
// by the write share. Queueing past saturation stays with the HBM bandwidth server.
#pragma once
#include <cstdint>
#include <vector>

#include "cais/time.h"

namespace cais::gpu {

struct HopperConfig;

class HbmLoad {
 public:
  explicit HbmLoad(const HopperConfig& cfg);
  // Traffic HBM serves from `now` on (a read miss or a write-back).
  void account(TimePs now, std::uint64_t bytes, bool write);
  // The extra latency of a read that reaches HBM at `now` (>= the last account time).
  TimePs extra_latency(TimePs now) const;
  // Utilisation (0..) and write share of the traffic at `now` (tests, statistics).
  double utilisation(TimePs now) const;
  double write_share() const;

 private:
  double decayed(double rate, TimePs now) const;
  const std::vector<double>& util_;
  const std::vector<double>& read_ps_;
  const std::vector<double>& copy_ps_;
  double peak_bytes_per_ps_ = 1, window_ps_ = 1;
  double read_rate_ = 0, write_rate_ = 0;  // bytes per ps, as of last_
  TimePs last_ = 0;
};

}  // namespace cais::gpu
