// Seeded draws of the cross-GPU drift sources (launch skew, per-block variation, thread-block
// dispatch order, per-GPU clock), keyed by what each draw belongs to (GPU, launch, block) rather
// than by the order events happen in. So a run is deterministic and partition invariant, and
// scaling one source (docs/DRIFT.md) leaves the draws of the others where they were.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "cais/gpu/hopper_config.h"
#include "cais/sim.h"

namespace cais::gpu {

enum class DriftSource : std::uint64_t { kLaunchSkew = 1, kBlockJitter = 2, kTbOrder = 3, kClock = 4 };

class DriftDraws {
 public:
  DriftDraws(const Sim& sim, const std::string& gpu_name);
  // Uniform in [0, 1) and standard normal, one value per (source, a, b).
  double uniform(DriftSource s, std::uint64_t a, std::uint64_t b = 0) const;
  double normal(DriftSource s, std::uint64_t a, std::uint64_t b = 0) const;

 private:
  std::uint64_t bits(DriftSource s, std::uint64_t a, std::uint64_t b) const;
  std::uint64_t base_;
};

// The configuration of one GPU: the shared one with its SM clock scaled by this GPU's draw,
// 1 + gpu.clock_spread_frac x N(0, 1) clamped to [0.5, 1.5] (the SM's L2 port scales with it).
HopperConfig drifted_config(Sim& sim, const std::string& gpu_name);

// Dispatch order of `blocks` blocks of launch `launch`: block i gets the key i + window x U[0,1)
// and blocks go in key order, so each leaves raster order by fewer than `window` places
// (window <= 1: raster order).
std::vector<std::uint32_t> windowed_order(std::uint32_t blocks, std::uint32_t window, const DriftDraws& d,
                                          std::uint32_t launch);

}  // namespace cais::gpu
