#include "cais/gpu/local_memory.h"

#include <algorithm>

namespace cais::gpu {

LocalMemory::LocalMemory(const HopperConfig& cfg)
    : cfg_(cfg), load_bytes_per_ps_(cfg.sm_load_bytes_per_ps), store_bytes_per_ps_(cfg.sm_store_bytes_per_ps),
      warp_load_bytes_per_ps_(cfg.warp_load_bytes_per_ps),
      hbm_load_(cfg) {
  sm_ports_.resize(cfg.num_sms);
  l2_.bytes_per_ps = cfg.l2_bytes_per_ps;
  l2_tiles_.set_capacity(cfg.l2_bytes);
  hbm_.bytes_per_ps = cfg.hbm_bytes_per_ps;
}

TimePs LocalMemory::access(TimePs now, std::uint32_t sm, std::uint64_t key, std::uint64_t bytes, bool write,
                           TimePs* first_back) {
  PortCalendar& port = sm_ports_[sm];
  const TimePs l2_served = l2_.reserve(now, bytes);
  const bool hit = l2_tiles_.lookup_insert(key, static_cast<std::uint32_t>(std::min<std::uint64_t>(bytes, 0xffffffffu)));
  if (write) {  // the data leaves the SM now; the store completes in L2, its write-back occupies HBM
    hbm_reserve(now, bytes, true);
    return std::max(port.reserve(now, now, bytes, store_bytes_per_ps_), l2_served) + cfg_.l2_latency_ps;
  }
  // A load's first bytes reach the SM a latency after L2 (a hit) or HBM (a miss) began serving
  // them, its last a latency after they were served; in between they stream through the port.
  TimePs first = l2_.started() + cfg_.l2_latency_ps, last = l2_served + cfg_.l2_latency_ps;
  if (!hit) {
    ++l2_misses_;
    hbm_read_bytes_ += bytes;
    const TimePs served = hbm_reserve(now, bytes, false);
    const TimePs miss = cfg_.hbm_latency_ps + hbm_load_.extra_latency(now) + cfg_.l2_latency_ps;
    first = std::max(first, hbm_.started() + miss);
    last = std::max(last, served + miss);
  } else {
    ++l2_hits_;
  }
  if (first_back) *first_back = first;
  return std::max(port.reserve(now, first, bytes, load_bytes_per_ps_), last);
}

TimePs LocalMemory::warp_round_end(TimePs now, TimePs first, std::uint64_t loaded, std::uint64_t stored,
                                   std::uint32_t warps) const {
  const double w = warps;
  const double delay = static_cast<double>(first - now) + static_cast<double>(loaded) / w / warp_load_bytes_per_ps_;
  const double port = (static_cast<double>(loaded) / load_bytes_per_ps_ + static_cast<double>(stored) / store_bytes_per_ps_) / w;
  double queue = 0, rounds_per_ps = 0;
  for (std::uint32_t n = 1; n <= warps; ++n) {
    const double residence = port * (1.0 + queue);
    rounds_per_ps = n / (delay + residence);
    queue = rounds_per_ps * residence;
  }
  return now + static_cast<TimePs>(w / rounds_per_ps + 0.5);
}

TimePs LocalMemory::remote_read(TimePs now, std::uint64_t bytes) {
  return std::max(l2_.reserve(now, bytes), hbm_reserve(now, bytes, false)) + cfg_.l2_latency_ps;
}

void LocalMemory::remote_write(TimePs now, std::uint64_t bytes) {
  l2_.reserve(now, bytes);
  hbm_reserve(now, bytes, true);
}

}  // namespace cais::gpu
