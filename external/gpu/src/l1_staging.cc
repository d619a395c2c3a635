#include "cais/gpu/l1_staging.h"

#include <algorithm>

namespace cais::gpu {

L1Staging::L1Staging(const HopperConfig& cfg) : cfg_(cfg), sms_(cfg.num_sms) {}

std::uint64_t L1Staging::config_for(std::uint64_t smem) const {
  for (const std::uint64_t c : cfg_.smem_configs)
    if (c >= smem) return c;
  return cfg_.smem_configs.back();  // occupancy never exceeds gpu.smem_per_sm_kb (<= the largest)
}

void L1Staging::take_block(std::uint32_t sm, std::uint32_t launch, std::uint64_t smem, bool empty, bool keep,
                           bool holds) {
  Sm& s = sms_[sm];
  if (empty && keep && smem <= s.config) {
    ++kept_;
    if (holds) s.launch = launch;
    return;
  }
  if (empty || smem > s.config) {
    s.config = config_for(smem);
    s.launch = launch;
  }
}

TimePs L1Staging::admit(std::uint32_t sm, TimePs now, std::uint64_t bytes, TimePs done) {
  auto& loads = sms_[sm].loads;
  loads.erase(loads.begin(), std::find_if(loads.begin(), loads.end(), [now](const InFlight& f) { return f.done > now; }));
  std::uint64_t inflight = 0;
  for (const InFlight& f : loads) inflight += f.bytes;
  const std::uint64_t cap = std::max<std::uint64_t>(1, l1_bytes(sm));
  TimePs t = done;
  if (inflight + bytes > cap) {
    const TimePs lat = std::max<TimePs>(1, done - now);
    // the last byte enters once the loads in flight have returned what it lacks (all of them
    // when it is larger than the L1 by itself), then its own lines cycle through
    const std::uint64_t lack = std::min(inflight, inflight + bytes - cap);
    TimePs enter = now;
    std::uint64_t back = 0;
    for (const InFlight& f : loads) {
      if (back >= lack) break;
      back += f.bytes;
      enter = f.done;
    }
    if (bytes > cap)
      enter += static_cast<TimePs>(static_cast<double>(bytes - cap) * static_cast<double>(lat) / static_cast<double>(cap));
    t = std::max(done, enter + lat);
    if (t > done) ++held_loads_;
  }
  const InFlight f{t, bytes};
  loads.insert(std::upper_bound(loads.begin(), loads.end(), f, [](const InFlight& a, const InFlight& b) { return a.done < b.done; }),
               f);
  return t;
}

}  // namespace cais::gpu
