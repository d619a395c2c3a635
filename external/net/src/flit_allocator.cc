#include "cais/net/flit_allocator.h"

#include "cais/errors.h"

namespace cais::net {

namespace {
// First set bit at or after `ptr` in a 64-bit mask, wrapping around; -1 if none.
int pick64(std::uint64_t mask, std::uint32_t ptr) {
  if (mask == 0) return -1;
  const std::uint64_t upper = ptr >= 64 ? 0 : mask & (~0ull << ptr);
  return __builtin_ctzll(upper ? upper : mask);
}

// Same over a 128-bit mask: the first set bit in [ptr, 128), else in [0, ptr).
int pick128(const std::array<std::uint64_t, 2>& m, std::uint32_t ptr) {
  for (std::uint32_t w = ptr >> 6; w < 2; ++w) {
    const std::uint64_t bits = w == (ptr >> 6) ? m[w] & (~0ull << (ptr & 63)) : m[w];
    if (bits) return static_cast<int>(64 * w + __builtin_ctzll(bits));
  }
  for (std::uint32_t w = 0; w < 2; ++w)
    if (m[w]) return static_cast<int>(64 * w + __builtin_ctzll(m[w]));
  return -1;
}
}  // namespace

void FlitAllocator::init(std::uint32_t inputs, std::uint32_t outputs, std::uint32_t vcs_per_input) {
  if (inputs > kMaxInputs || outputs > kMaxOutputs)
    throw ConfigError("net.sw_alloc_granularity", "flit allocation supports routers of at most " +
                                                      std::to_string(kMaxOutputs) + " ports");
  if (vcs_per_input > 64) throw ConfigError("net.vcs_per_port", "at most 63 VCs per port");
  inputs_ = inputs;
  outputs_ = outputs;
  vcs_ = vcs_per_input;
  in_out_mask_.assign(inputs, 0);
  best_vc_.assign(static_cast<std::size_t>(inputs) * outputs, 0);
  in_ptr_.assign(inputs, 0);
  vc_ptr_.assign(inputs, 0);
  out_ptr_.assign(outputs, 0);
  out_in_mask_.assign(outputs, {0, 0});
  active_in_.clear();
  active_out_.clear();
}

void FlitAllocator::allocate(std::vector<FlitGrant>& grants) {
  for (std::uint32_t in : active_in_) {  // input arbiters
    const auto out = static_cast<std::uint32_t>(pick64(in_out_mask_[in], in_ptr_[in]));
    auto& m = out_in_mask_[out];
    if ((m[0] | m[1]) == 0) active_out_.push_back(out);
    m[in >> 6] |= 1ull << (in & 63);
  }
  for (std::uint32_t out : active_out_) {  // output arbiters
    auto& m = out_in_mask_[out];
    const auto in = static_cast<std::uint32_t>(pick128(m, out_ptr_[out]));
    m = {0, 0};
    const std::uint32_t vc = best_vc_[static_cast<std::size_t>(in) * outputs_ + out];
    grants.push_back({in, vc, out});
    in_ptr_[in] = out + 1 == outputs_ ? 0 : out + 1;
    out_ptr_[out] = in + 1 == inputs_ ? 0 : in + 1;
    vc_ptr_[in] = vc + 1 == vcs_ ? 0 : vc + 1;
  }
  for (std::uint32_t in : active_in_) in_out_mask_[in] = 0;
  active_in_.clear();
  active_out_.clear();
}

void SeparableVcAllocator::init(std::uint32_t input_queues, std::uint32_t outputs, std::uint32_t vcs) {
  if (vcs > 64) throw ConfigError("net.vcs_per_port", "at most 64 VCs per port");
  queues_ = input_queues;
  vcs_ = vcs;
  output_vcs_ = outputs * vcs;
  in_ptr_.assign(input_queues, 0);
  out_ptr_.assign(output_vcs_, 0);
  pick_.assign(output_vcs_, -1);
  picked_.clear();
}

void SeparableVcAllocator::request(std::uint32_t iq, std::uint32_t out, std::uint64_t free_vcs) {
  // Input arbiter: the first requested output VC at or after the pointer, wrapping around.
  const std::uint32_t base = out * vcs_, ptr = in_ptr_[iq];
  std::uint64_t from = free_vcs;
  if (ptr >= base && ptr < base + vcs_) {
    const std::uint64_t upper = free_vcs & (~0ull << (ptr - base));
    if (upper) from = upper;
  }
  const std::uint32_t ovc = base + static_cast<std::uint32_t>(__builtin_ctzll(from));
  // Output arbiter: keep the requester nearest (at or after) the output VC's pointer.
  std::int64_t& pick = pick_[ovc];
  if (pick < 0) {
    picked_.push_back(ovc);
    pick = iq;
    return;
  }
  const std::uint32_t p = out_ptr_[ovc];
  const auto dist = [&](std::uint32_t q) { return (q + queues_ - p) % queues_; };
  if (dist(iq) < dist(static_cast<std::uint32_t>(pick))) pick = iq;
}

void SeparableVcAllocator::allocate(std::vector<std::pair<std::uint32_t, std::uint32_t>>& grants) {
  for (std::uint32_t ovc : picked_) {
    const auto iq = static_cast<std::uint32_t>(pick_[ovc]);
    pick_[ovc] = -1;
    grants.emplace_back(iq, ovc);
    in_ptr_[iq] = (ovc + 1) % output_vcs_;
    out_ptr_[ovc] = (iq + 1) % queues_;
  }
  picked_.clear();
}

}  // namespace cais::net
