#include "cais/gpu/local_memory.h"

#include <algorithm>

namespace cais::gpu {

LocalMemory::LocalMemory(const HopperConfig& cfg) : cfg_(cfg), hbm_load_(cfg) {
  sm_ports_.resize(cfg.num_sms);
  for (auto& s : sm_ports_) s.bytes_per_ps = cfg.sm_port_bytes_per_ps;
  l2_.bytes_per_ps = cfg.l2_bytes_per_ps;
  l2_tiles_.set_capacity(cfg.l2_bytes);
  hbm_.bytes_per_ps = cfg.hbm_bytes_per_ps;
}

TimePs LocalMemory::access(TimePs now, std::uint32_t sm, std::uint64_t key, std::uint64_t bytes, bool write) {
  TimePs t = std::max(sm_ports_[sm].reserve(now, bytes), l2_.reserve(now, bytes)) + cfg_.l2_latency_ps;
  const bool hit = l2_tiles_.lookup_insert(key, static_cast<std::uint32_t>(std::min<std::uint64_t>(bytes, 0xffffffffu)));
  if (write) {
    hbm_reserve(now, bytes, true);  // write-back traffic; the store completes in L2
  } else if (!hit) {
    ++l2_misses_;
    hbm_read_bytes_ += bytes;
    const TimePs served = hbm_reserve(now, bytes, false);
    t = std::max(t, served + cfg_.hbm_latency_ps + hbm_load_.extra_latency(now) + cfg_.l2_latency_ps);
  } else {
    ++l2_hits_;
  }
  return t;
}

TimePs LocalMemory::remote_read(TimePs now, std::uint64_t bytes) {
  return std::max(l2_.reserve(now, bytes), hbm_reserve(now, bytes, false)) + cfg_.l2_latency_ps;
}

void LocalMemory::remote_write(TimePs now, std::uint64_t bytes) {
  l2_.reserve(now, bytes);
  hbm_reserve(now, bytes, true);
}

}  // namespace cais::gpu
