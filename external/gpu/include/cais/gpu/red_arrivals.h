// Home-side completion of red.cais (HPCA'26 CAIS III-C1; PAPER_SPEC 3.6): a home GPU counts the
// contributions that land in a buffer, per region, so a consumer block can wait for them.
//
// A buffer opts in with Buffer.arrival_region_bytes R > 0 and Buffer.arrival_flag_buffer F
// (proto/isa.proto): the buffer is cut into regions of R bytes, region i owning the 8 B flag at
// offset 8*i of F. Every CAIS_RED that lands here (a switch's merged sum with `count` = the
// contributions in it, an evicted or timed-out partial with fewer, an unmerged one with 1)
// adds count x payload bytes to the flag of its region, when its data is applied. A region
// that expects one contribution of R bytes from each of N-1 peers is complete when its flag
// reaches (N-1) x R: `flag.wait buf=F addr=[8*i] value=(N-1)*R`. Only packets that cross
// NVLink count; the home's own (local) red.cais is ordered by TB dependencies instead.
// R must be a multiple of gpu.max_packet_bytes, so that no packet straddles two regions.
#pragma once
#include <cstdint>
#include <vector>

#include "cais/gpu/gpu_context.h"

namespace cais::gpu {

class RedArrivals {
 public:
  // Checks the workload's counters; throws ConfigError("workload", ...) naming the buffer.
  explicit RedArrivals(GpuContext& ctx);
  // A CAIS_RED whose data has just been applied to this GPU's memory.
  void landed(const Packet& p);

  std::uint64_t& packets() { return packets_; }
  std::uint64_t& contributions() { return contributions_; }

 private:
  // One line of it (a bulk packet lands line by line, as its separate packets would).
  void landed_line(std::uint64_t addr, std::uint32_t payload_bytes, std::uint32_t packet_count);
  struct Counted {
    std::uint64_t base = 0, end = 0;  // heap range of the counted buffer
    std::uint64_t region_bytes = 0;
    std::uint64_t flag_base = 0;      // heap offset of region 0's flag
  };
  GpuContext& ctx_;
  std::vector<Counted> counted_;
  std::uint64_t packets_ = 0, contributions_ = 0;
};

}  // namespace cais::gpu
