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
  // (in, vc) has a flit for `out` this cycle.
  void request(std::uint32_t in, std::uint32_t vc, std::uint32_t out);
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

}  // namespace cais::net
