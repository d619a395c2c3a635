#include "cais/gpu/drift.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace cais::gpu {
namespace {
std::uint64_t splitmix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
}  // namespace

DriftDraws::DriftDraws(const Sim& sim, const std::string& gpu_name) : base_(sim.make_rng("drift." + gpu_name)()) {}

std::uint64_t DriftDraws::bits(DriftSource s, std::uint64_t a, std::uint64_t b) const {
  return splitmix(splitmix(splitmix(base_ ^ static_cast<std::uint64_t>(s)) ^ a) ^ b);
}

double DriftDraws::uniform(DriftSource s, std::uint64_t a, std::uint64_t b) const {
  return static_cast<double>(bits(s, a, b) >> 11) * 0x1.0p-53;
}

double DriftDraws::normal(DriftSource s, std::uint64_t a, std::uint64_t b) const {
  // Box-Muller from two independent uniforms of this key (u1 in (0, 1]).
  const double u1 = 1.0 - uniform(s, a, 2 * b), u2 = uniform(s, a, 2 * b + 1);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

HopperConfig drifted_config(Sim& sim, const std::string& gpu_name) {
  HopperConfig c = HopperConfig::from_params(sim.params());
  if (c.clock_spread_frac > 0) {
    const double scale =
        std::clamp(1.0 + c.clock_spread_frac * DriftDraws(sim, gpu_name).normal(DriftSource::kClock, 0), 0.5, 1.5);
    c.clock_ghz *= scale;
    c.clock_ghz_without_mma *= scale;
    c.sm_load_bytes_per_ps *= scale;
    c.sm_store_bytes_per_ps *= scale;
    c.warp_load_bytes_per_ps *= scale;
  }
  return c;
}

std::vector<std::uint32_t> windowed_order(std::uint32_t blocks, std::uint32_t window, const DriftDraws& d,
                                          std::uint32_t launch) {
  std::vector<std::uint32_t> order(blocks);
  std::iota(order.begin(), order.end(), 0u);
  if (window <= 1) return order;
  std::vector<double> key(blocks);
  for (std::uint32_t i = 0; i < blocks; ++i) key[i] = i + window * d.uniform(DriftSource::kTbOrder, launch, i);
  std::stable_sort(order.begin(), order.end(), [&key](std::uint32_t a, std::uint32_t b) { return key[a] < key[b]; });
  return order;
}

}  // namespace cais::gpu
