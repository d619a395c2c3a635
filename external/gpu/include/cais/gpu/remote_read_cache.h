// Remote read-only tiles kept in the requester's L2 (spec A7: RTWICE-style caching of remote
// lines, as LADM and the CAIS paper's AG-GEMM assume). A remote load (ld.remote, ld.cais) of a
// tile that another block of this GPU fetched in the same launch hits the local L2: the tile
// sits in LocalMemory's tile cache under a key of (launch, peer, buffer, extent), evicted FIFO by
// bytes like local tiles. A tile still in flight is joined, as an MSHR merges misses to one
// line: the joining block sends nothing and completes when the fetch does. The key carries the
// launch, so no later kernel hits what an earlier one read (invalidation at kernel end).
#pragma once
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "cais/gpu/gpu_context.h"

namespace cais::gpu {

class RemoteReadCache {
 public:
  explicit RemoteReadCache(GpuContext& ctx) : ctx_(ctx) {}
  enum class Outcome : std::uint8_t { kHit, kJoined, kFetch };
  // Block `tbi` loads the tile `key` of `bytes` into register `reg` (0: none) at `pc`, or
  // nothing when `bytes` is 0. kHit: served from L2, complete at the returned `done` time.
  // kJoined: the block waits for the fetch in flight (counted as its outstanding remote load).
  // kFetch: the caller fetches it remotely and calls filled() when that completes.
  Outcome lookup(std::uint64_t key, std::uint64_t bytes, std::uint32_t tbi, std::uint32_t reg, std::uint32_t pc,
                 std::size_t elements, TimePs& done);
  // The fetch of `key` by block `tbi` into register `reg` completed: the tile is resident and
  // every joined block completes (with the tile's values in functional runs).
  void filled(std::uint64_t key, std::uint64_t bytes, std::uint32_t tbi, std::uint32_t reg);
  struct Joiner {
    std::uint32_t tbi, reg;
  };
  // The blocks other than the fetching one that wait for the fetch of `key`, in the order they
  // joined; nullptr when none does.
  const std::vector<Joiner>* joiners(std::uint64_t key) const {
    const auto it = in_flight_.find(key);
    return it == in_flight_.end() || it->second.empty() ? nullptr : &it->second;
  }
  bool drained() const { return in_flight_.empty(); }

  std::uint64_t& hits() { return hits_; }
  std::uint64_t& joins() { return joins_; }
  std::uint64_t& fetches() { return fetches_; }

 private:
  GpuContext& ctx_;
  std::unordered_map<std::uint64_t, std::vector<Joiner>> in_flight_;  // key -> blocks waiting
  std::unordered_map<std::uint64_t, std::vector<double>> values_;     // functional runs: tile values
  std::uint64_t hits_ = 0, joins_ = 0, fetches_ = 0;
};

}  // namespace cais::gpu
