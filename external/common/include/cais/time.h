// Simulated time: integer picoseconds everywhere.
#pragma once
#include <cstdint>
#include <limits>

namespace cais {

using TimePs = std::uint64_t;
inline constexpr TimePs kNever = std::numeric_limits<TimePs>::max();

inline constexpr TimePs ns_to_ps(double ns) { return static_cast<TimePs>(ns * 1000.0 + 0.5); }

// Time to serialise `bytes` at `bytes_per_ns` (== GB/s), rounded up so that a link never
// runs faster than configured.
inline TimePs serialization_ps(std::uint64_t bytes, double gb_per_s) {
  const double ps = static_cast<double>(bytes) * 1000.0 / gb_per_s;
  const auto whole = static_cast<TimePs>(ps);
  return (static_cast<double>(whole) < ps) ? whole + 1 : whole;
}

}  // namespace cais
