// Deterministic address-hashed plane selection shared by GPUs and switches.
//
// A GPU spreads its traffic over its NVLink ports (one per switch plane) in proportion to the
// lanes of each port; because the choice depends only on the address, every request for one
// address, from any GPU, and the owner's response, meet in the same switch (CAIS III-A5).
#pragma once
#include <cstdint>
#include <vector>

namespace cais {

// splitmix64 finaliser: cheap, well mixed, stable across platforms.
inline std::uint64_t mix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Maps an address to a plane index with probability proportional to weights[i].
// `granule_bytes` is the interleaving unit (addresses in one granule share a plane).
class PlaneHash {
 public:
  PlaneHash() = default;
  PlaneHash(const std::vector<std::uint32_t>& weights, std::uint64_t granule_bytes)
      : granule_(granule_bytes) {
    for (std::uint32_t plane = 0; plane < weights.size(); ++plane)
      for (std::uint32_t w = 0; w < weights[plane]; ++w) slots_.push_back(plane);
  }
  std::uint32_t plane(std::uint64_t addr) const {
    return slots_[mix64(addr / granule_) % slots_.size()];
  }
  std::uint32_t plane_for_key(std::uint64_t key) const { return slots_[mix64(key) % slots_.size()]; }
  bool empty() const { return slots_.empty(); }

 private:
  std::uint64_t granule_ = 128;
  std::vector<std::uint32_t> slots_;
};

}  // namespace cais
