// Separable input-first switch allocator at flit granularity (BookSim2's iq_router with
// sw_allocator = separable_input_first, alloc_iters = 1, hold_switch_for_packet = 0).
//
// Called once per router cycle while some input has a flit to move (never for an idle router).
// Each input VC whose front flit may cross this cycle files a request for its output. Per
// (input, output) the VC nearest the input's VC pointer represents the input (BookSim's
// Supersedes); each input arbiter then picks one of its requested outputs round-robin, each
// output arbiter one of the inputs that picked it, round-robin. Arbiter pointers move past the
// winner only on a grant, and an input's VC pointer moves past the granted VC. Flits of
// different packets thus interleave on an output, one flit per cycle.
#pragma once
#include <array>
#include <cstdint>
#include <utility>
#include <vector>

namespace cais::net {

struct FlitGrant {
  std::uint32_t in = 0, vc = 0, out = 0;
};

class FlitAllocator {
 public:
  static constexpr std::uint32_t kMaxInputs = 128, kMaxOutputs = 64;
  // `vcs_per_input` counts every queue of an input (VCs plus the injection queue), at most 64.
  void init(std::uint32_t inputs, std::uint32_t outputs, std::uint32_t vcs_per_input);
  // (in, vc) has a flit for `out` this cycle (inline: called once per waiting flit per cycle).
  void request(std::uint32_t in, std::uint32_t vc, std::uint32_t out);
  // The same for every VC set in `vcs` (one request per set bit, in one call).
  void request_vcs(std::uint32_t in, std::uint64_t vcs, std::uint32_t out);
  // Matches this cycle's requests (appended to `grants`, at most one per input and per output)
  // and clears them.
  void allocate(std::vector<FlitGrant>& grants);

  std::uint32_t input_pointer(std::uint32_t in) const { return in_ptr_[in]; }
  std::uint32_t output_pointer(std::uint32_t out) const { return out_ptr_[out]; }

 private:
  std::uint32_t inputs_ = 0, outputs_ = 0, vcs_ = 0;
  std::vector<std::uint64_t> in_out_mask_;  // [in] outputs requested this cycle
  std::vector<std::uint8_t> best_vc_;       // [in * outputs + out] VC representing (in, out)
  std::vector<std::uint32_t> in_ptr_;       // [in] input arbiter pointer (over outputs)
  std::vector<std::uint32_t> vc_ptr_;       // [in] BookSim's _sw_rr_offset (over VCs)
  std::vector<std::uint32_t> out_ptr_;      // [out] output arbiter pointer (over inputs)
  std::vector<std::array<std::uint64_t, 2>> out_in_mask_;  // [out] inputs that picked it
  std::vector<std::uint32_t> active_in_, active_out_;
};

// Separable input-first VC allocator at router-cycle granularity (BookSim2's
// vc_allocator = separable_input_first with round-robin arbiters). Every head that needs a
// downstream VC this cycle asks for all the free VCs of its output; its input-VC arbiter picks
// the first at or after its pointer (over all outputs' VCs, out * vcs + vc), each output VC's
// arbiter the first requesting input queue at or after its pointer. Pointers move past the
// winner only on a grant; a head whose pick went to another retries next cycle.
class SeparableVcAllocator {
 public:
  void init(std::uint32_t input_queues, std::uint32_t outputs, std::uint32_t vcs);
  // Input queue `iq` asks for one of the VCs of `out` set in `free_vcs` (bit v: VC v).
  void request(std::uint32_t iq, std::uint32_t out, std::uint64_t free_vcs);
  // Appends this cycle's grants as (input queue, out * vcs + vc) and clears the requests.
  void allocate(std::vector<std::pair<std::uint32_t, std::uint32_t>>& grants);

 private:
  std::uint32_t queues_ = 0, vcs_ = 0, output_vcs_ = 0;
  std::vector<std::uint32_t> in_ptr_;   // [iq] over output VCs
  std::vector<std::uint32_t> out_ptr_;  // [output VC] over input queues
  std::vector<std::int64_t> pick_;      // [output VC] input queue it grants this cycle, -1: none
  std::vector<std::uint32_t> picked_;   // output VCs with a pick this cycle
};

inline void FlitAllocator::request_vcs(std::uint32_t in, std::uint64_t vcs, std::uint32_t out) {
  std::uint64_t& m = in_out_mask_[in];
  if (m == 0) active_in_.push_back(in);
  m |= 1ull << out;
  // The VC nearest at or after the pointer, wrapping around: what request() keeps of them.
  const std::uint32_t ptr = vc_ptr_[in];
  const std::uint64_t upper = vcs & (~0ull << ptr);
  best_vc_[static_cast<std::size_t>(in) * outputs_ + out] =
      static_cast<std::uint8_t>(__builtin_ctzll(upper ? upper : vcs));
}

inline void FlitAllocator::request(std::uint32_t in, std::uint32_t vc, std::uint32_t out) {
  std::uint64_t& m = in_out_mask_[in];
  std::uint8_t& best = best_vc_[static_cast<std::size_t>(in) * outputs_ + out];
  if (m == 0) active_in_.push_back(in);
  if (!((m >> out) & 1u)) {
    m |= 1ull << out;
    best = static_cast<std::uint8_t>(vc);
    return;
  }
  // The VC nearest at or after the pointer, wrapping around (no division on this hot path).
  const std::uint32_t ptr = vc_ptr_[in];
  const auto dist = [&](std::uint32_t v) { return v >= ptr ? v - ptr : v + vcs_ - ptr; };
  if (dist(vc) < dist(best)) best = static_cast<std::uint8_t>(vc);
}

}  // namespace cais::net
