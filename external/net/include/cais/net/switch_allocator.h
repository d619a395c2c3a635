// Separable input-first switch allocator with round-robin arbiters, at packet granularity.
//
// Stage 1 (input arbiters): a free input port picks one of its VCs whose head packet is ready
// (routed, holding a downstream VC), round-robin, without looking at the outputs, and keeps
// that request until it is granted (BookSim's input-first allocator advances an arbiter only
// on a grant) or until it has lost `patience` arbitrations in a row. At flit granularity
// (BookSim) a lost arbitration costs one cycle and the winner interleaves with the loser; at
// packet granularity it costs a whole packet time, so a purely sticky input (patience 0)
// under-estimates BookSim's saturation throughput (8x8 uniform: 0.62 vs 0.69), an input that
// moves on after every loss over-estimates it (0.81); patience 2 matches (0.68), see
// docs/VALIDATION.md. Stage 2 (output arbiters): a free output grants one of the inputs
// requesting it, round-robin. A granted input and output stay busy while the packet streams
// through the crossbar. There is no polling: the router calls select() when an input becomes free or one
// of its VCs becomes ready, and grant() when an output becomes free or gets a new request.
#pragma once
#include <cstdint>
#include <vector>

#include "cais/time.h"

namespace cais::net {

// Round-robin arbiter over n requesters: the winner is the first requester at or after the
// pointer; the pointer moves past the winner only when update() is called (on a grant).
class RoundRobinArbiter {
 public:
  void init(std::uint32_t n) {
    n_ = n;
    ptr_ = 0;
  }
  std::uint32_t size() const { return n_; }
  std::uint32_t pointer() const { return ptr_; }
  // Lowest (index - pointer) mod n among a bit mask of requesters (n <= 64); -1 if none.
  std::int32_t pick_mask(std::uint64_t mask) const {
    if (mask == 0) return -1;
    const std::uint64_t upper = ptr_ >= 64 ? 0 : mask & (~0ull << ptr_);
    const std::uint64_t m = upper ? upper : mask;
    return __builtin_ctzll(m);
  }
  // Same over a list of requester indices.
  std::int32_t pick_list(const std::vector<std::uint32_t>& reqs) const {
    std::int32_t best = -1;
    std::uint32_t best_d = 0;
    for (std::uint32_t r : reqs) {
      const std::uint32_t d = (r + n_ - ptr_) % n_;
      if (best < 0 || d < best_d) {
        best = static_cast<std::int32_t>(r);
        best_d = d;
      }
    }
    return best;
  }
  void update(std::uint32_t winner) { ptr_ = (winner + 1) % n_; }

 private:
  std::uint32_t n_ = 1, ptr_ = 0;
};

class SwitchAllocator {
 public:
  // `vcs_per_input` counts the injection queue; at most 64.
  void init(std::uint32_t inputs, std::uint32_t outputs, std::uint32_t vcs_per_input);

  // Input side.
  bool input_free(std::uint32_t in, TimePs now) const { return in_busy_[in] <= now && sel_[in] < 0; }
  std::int32_t selected(std::uint32_t in) const { return sel_[in]; }
  TimePs input_busy_until(std::uint32_t in) const { return in_busy_[in]; }
  void set_ready(std::uint32_t in, std::uint32_t vc, bool ready) {
    if (ready) ready_[in] |= 1ull << vc;
    else ready_[in] &= ~(1ull << vc);
  }
  bool ready(std::uint32_t in, std::uint32_t vc) const { return (ready_[in] >> vc) & 1u; }
  // Stage 1: if `in` is free and has no request, pick a ready VC round-robin (-1 if none); the
  // caller then files the request for the VC's output with request().
  std::int32_t select(std::uint32_t in, TimePs now) const;
  void request(std::uint32_t in, std::uint32_t vc, std::uint32_t out);

  // Output side.
  bool has_requests(std::uint32_t out) const { return !requests_[out].empty(); }
  // Stage 2: among inputs requesting `out`, grant one round-robin. Returns the input or -1.
  // The caller then calls commit() with the times the transfer occupies.
  std::int32_t grant(std::uint32_t out);
  void commit(std::uint32_t in, std::uint32_t out, TimePs busy_until);
  // After a grant at `out`, every other input requesting it lost once more. An input that lost
  // `patience` arbitrations in a row withdraws, its arbiter moves past the VC that lost, and it
  // is listed in `movers` so that it can select again (patience 0: never, purely sticky).
  void lost(std::uint32_t out, std::uint32_t patience, std::vector<std::uint32_t>& movers);

  // Outputs that got requests since the last drain (for one allocation pass per time step).
  std::vector<std::uint32_t>& dirty() { return dirty_; }
  void mark_dirty(std::uint32_t out);
  void clear_dirty(std::uint32_t out) { is_dirty_[out] = 0; }

  std::uint64_t grants() const { return grants_; }

 private:
  std::vector<RoundRobinArbiter> in_arb_, out_arb_;
  std::vector<std::uint64_t> ready_;
  std::vector<std::int32_t> sel_;
  std::vector<TimePs> in_busy_;
  std::vector<std::uint32_t> losses_;  // lost arbitrations since the input's last grant
  std::vector<std::vector<std::uint32_t>> requests_;
  std::vector<std::uint32_t> dirty_;
  std::vector<std::uint8_t> is_dirty_;
  std::uint64_t grants_ = 0;
};

}  // namespace cais::net
