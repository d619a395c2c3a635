#include "cais/net/switch_allocator.h"

#include <algorithm>

#include "cais/errors.h"

namespace cais::net {

void SwitchAllocator::init(std::uint32_t inputs, std::uint32_t outputs, std::uint32_t vcs_per_input) {
  if (vcs_per_input > 64) throw ConfigError("net.vcs_per_port", "at most 63 VCs per port");
  in_arb_.assign(inputs, {});
  for (auto& a : in_arb_) a.init(vcs_per_input);
  out_arb_.assign(outputs, {});
  for (auto& a : out_arb_) a.init(inputs);
  ready_.assign(inputs, 0);
  sel_.assign(inputs, -1);
  in_busy_.assign(inputs, 0);
  losses_.assign(inputs, 0);
  requests_.assign(outputs, {});
  dirty_.clear();
  is_dirty_.assign(outputs, 0);
  grants_ = 0;
}

std::int32_t SwitchAllocator::select(std::uint32_t in, TimePs now) const {
  if (sel_[in] >= 0 || in_busy_[in] > now) return -1;
  return in_arb_[in].pick_mask(ready_[in]);
}

void SwitchAllocator::request(std::uint32_t in, std::uint32_t vc, std::uint32_t out) {
  sel_[in] = static_cast<std::int32_t>(vc);
  requests_[out].push_back(in);
  mark_dirty(out);
}

std::int32_t SwitchAllocator::grant(std::uint32_t out) { return out_arb_[out].pick_list(requests_[out]); }

void SwitchAllocator::commit(std::uint32_t in, std::uint32_t out, TimePs busy_until) {
  const auto vc = static_cast<std::uint32_t>(sel_[in]);
  in_arb_[in].update(vc);
  out_arb_[out].update(in);
  auto& r = requests_[out];
  r.erase(std::find(r.begin(), r.end(), in));
  sel_[in] = -1;
  ready_[in] &= ~(1ull << vc);
  in_busy_[in] = busy_until;
  losses_[in] = 0;
  ++grants_;
}

void SwitchAllocator::lost(std::uint32_t out, std::uint32_t patience, std::vector<std::uint32_t>& movers) {
  movers.clear();
  if (patience == 0) return;
  auto& r = requests_[out];
  std::size_t kept = 0;
  for (std::uint32_t in : r) {
    if (++losses_[in] < patience) {
      r[kept++] = in;
      continue;
    }
    losses_[in] = 0;
    movers.push_back(in);
    in_arb_[in].update(static_cast<std::uint32_t>(sel_[in]));
    sel_[in] = -1;
  }
  r.resize(kept);
}

void SwitchAllocator::mark_dirty(std::uint32_t out) {
  if (is_dirty_[out]) return;
  is_dirty_[out] = 1;
  dirty_.push_back(out);
}

}  // namespace cais::net
