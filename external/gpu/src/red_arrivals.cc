#include "cais/gpu/red_arrivals.h"

#include <algorithm>
#include <string>

#include "cais/errors.h"
#include "cais/gpu/sync_flags.h"

namespace cais::gpu {

RedArrivals::RedArrivals(GpuContext& ctx) : ctx_(ctx) {
  const auto& bufs = ctx.wl.buffers();
  const std::uint64_t line = ctx.cfg.max_packet_bytes;
  for (const DecodedBuffer& d : bufs) {
    const isa::Buffer& b = *d.b;
    const std::uint64_t R = b.arrival_region_bytes();
    if (R == 0) continue;
    const std::string where = "buffer " + quote(b.name()) + ": arrival counter";
    if (R % line != 0)
      throw ConfigError("workload", where + " region of " + std::to_string(R) +
                                        " B must be a multiple of gpu.max_packet_bytes (" + std::to_string(line) +
                                        " B), so that every red.cais packet lands in one region");
    if (b.multicast()) throw ConfigError("workload", where + " on a multicast buffer (red.cais targets unicast buffers)");
    const std::uint32_t f = b.arrival_flag_buffer();
    if (f >= bufs.size()) throw ConfigError("workload", where + " flag buffer index " + std::to_string(f) + " out of range");
    const isa::Buffer& fb = *bufs[f].b;
    if (&fb == &b || fb.multicast())
      throw ConfigError("workload", where + " flag buffer " + quote(fb.name()) + " must be another, unicast buffer");
    const std::uint64_t regions = (b.bytes() + R - 1) / R;
    if (fb.bytes() < 8 * regions)
      throw ConfigError("workload", where + " needs " + std::to_string(regions) + " flags of 8 B, flag buffer '" +
                                        fb.name() + "' has " + std::to_string(fb.bytes()) + " B");
    counted_.push_back(Counted{d.base, d.base + b.bytes(), R, bufs[f].base});
  }
}

void RedArrivals::landed(const Packet& p) {
  if (counted_.empty()) return;
  const std::uint32_t line_bytes = p.payload_bytes / p.lines;
  for (std::uint32_t i = 0; i < p.lines; ++i) landed_line(p.line_addr(i), line_bytes, p.count);
}

void RedArrivals::landed_line(std::uint64_t addr, std::uint32_t payload_bytes, std::uint32_t packet_count) {
  const std::uint64_t off = addr & kOffsetMask;
  const auto it = std::find_if(counted_.begin(), counted_.end(),
                               [off](const Counted& c) { return off >= c.base && off < c.end; });
  if (it == counted_.end()) return;
  const std::uint64_t region = (off - it->base) / it->region_bytes;
  if ((off + payload_bytes - 1 - it->base) / it->region_bytes != region)
    throw InvariantError(ctx_.name() + ": CAIS_RED at offset " + std::to_string(off - it->base) + " (" +
                         std::to_string(payload_bytes) + " B) straddles two arrival regions");
  const std::uint32_t count = std::max<std::uint32_t>(1, packet_count);
  ++packets_;
  contributions_ += count;
  ctx_.flags->add(it->flag_base + 8 * region, static_cast<std::int64_t>(count) * payload_bytes);
}

}  // namespace cais::gpu
