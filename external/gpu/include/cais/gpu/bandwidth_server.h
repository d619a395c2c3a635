// A bandwidth server: requests are served in arrival order at a fixed rate (a busy-until time,
// no queue object), the building block of the GPU's SM ports, L2 and HBM.
#pragma once
#include <algorithm>
#include <cstdint>

#include "cais/time.h"

namespace cais::gpu {

struct BandwidthServer {
  double bytes_per_ps = 1;
  TimePs busy_until = 0;
  TimePs last_start = 0;  // when the last reservation began to be served
  std::uint64_t bytes = 0;
  TimePs reserve(TimePs t, std::uint64_t n) {
    last_start = std::max(t, busy_until);
    busy_until = last_start + static_cast<TimePs>(static_cast<double>(n) / bytes_per_ps + 0.5);
    bytes += n;
    return busy_until;
  }
  TimePs started() const { return last_start; }
};

}  // namespace cais::gpu
