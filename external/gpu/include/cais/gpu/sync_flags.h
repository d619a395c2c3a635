// Synchronisation of a Hopper GPU: CAIS group sync (SYNC_REQ to the group's switch, waiters
// released by SYNC_RELEASE) and memory flags (FLAG_SIGNAL adds, FLAG_WAIT parks until the
// flag reaches its value; remote signals arrive as flag writes).
#pragma once
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "cais/gpu/gpu_context.h"
#include "cais/stats.h"

namespace cais::gpu {

class GroupSync {
 public:
  explicit GroupSync(GpuContext& ctx) : ctx_(ctx) {}
  // Send SYNC_REQ for `group` (aux = participants) to the switch plane_for_key(group).
  void request(std::uint32_t group, std::uint32_t participants);
  // Waiters: a resident block slot, or a block of a launch registered ahead of dispatch.
  void wait_tb(std::uint32_t group, std::uint32_t tbi) { waiters_[group].push_back(tbi); }
  void wait_block(std::uint32_t group, std::uint32_t launch, std::uint32_t cta) {
    waiters_[group].push_back(kBlockWaiter | (static_cast<std::uint64_t>(launch) << 32) | cta);
  }
  // SYNC_RELEASE for `group`: dispatch registered blocks, resume waiting ones.
  void release(std::uint32_t group);
  std::size_t waiting() const;

  std::uint64_t& requests() { return requests_; }
  Histogram& wait_ns() { return wait_ns_; }

 private:
  static constexpr std::uint64_t kBlockWaiter = 1ull << 63;
  GpuContext& ctx_;
  std::unordered_map<std::uint32_t, std::vector<std::uint64_t>> waiters_;
  std::uint64_t requests_ = 0;
  Histogram wait_ns_;
};

class FlagTable {
 public:
  explicit FlagTable(GpuContext& ctx) : ctx_(ctx) {}
  // Flags are keyed by heap offset (buffer base + offset); one never written is 0.
  bool reached(std::uint64_t key, std::int64_t value) const {
    auto it = flags_.find(key);
    return (it == flags_.end() ? 0 : it->second) >= value;
  }
  void park(std::uint64_t key, std::uint32_t tbi) { waiters_[key].push_back(tbi); }
  // Add `v`; blocks parked on the flag re-check (and park again if still short).
  void add(std::uint64_t key, std::int64_t v);
  std::uint64_t value(std::uint64_t key) const {
    auto it = flags_.find(key);
    return it == flags_.end() ? 0 : static_cast<std::uint64_t>(it->second);
  }
  std::size_t waiting() const;

 private:
  GpuContext& ctx_;
  std::unordered_map<std::uint64_t, std::int64_t> flags_;
  std::unordered_map<std::uint64_t, std::vector<std::uint32_t>> waiters_;
};

}  // namespace cais::gpu
