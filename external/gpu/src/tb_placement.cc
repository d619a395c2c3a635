// Where a thread block goes: the dispatch order of a rasterised grid, the SM (or the TPC, for a
// 2-CTA cluster) a CTA takes, and the next block of a persistent CTA that shares out its blocks.
#include "cais/gpu/tb_scheduler.h"

#include <algorithm>

#include "cais/errors.h"

namespace cais::gpu {

std::vector<std::uint32_t> interleaved_rows(std::uint32_t gx, std::uint32_t gy, std::uint32_t groups,
                                           const std::string& kernel, bool blocks) {
  if (gy % groups != 0)
    throw ConfigError("workload", "kernel " + quote(kernel) + ": row_interleave " + std::to_string(groups) +
                                      " does not divide its " + std::to_string(gy) + " rows of blocks");
  const std::uint32_t per = gy / groups;
  std::vector<std::uint32_t> order;
  order.reserve(static_cast<std::size_t>(gx) * gy);
  if (blocks) {
    for (std::uint32_t r = 0; r < per; ++r)
      for (std::uint32_t bx = 0; bx < gx; ++bx)
        for (std::uint32_t j = 0; j < groups; ++j) order.push_back((j * per + r) * gx + bx);
    return order;
  }
  for (std::uint32_t rp = 0; rp < gy; ++rp) {
    const std::uint32_t by = (rp % groups) * per + rp / groups;
    for (std::uint32_t bx = 0; bx < gx; ++bx) order.push_back(by * gx + bx);
  }
  return order;
}

std::uint32_t TbScheduler::tpc_blocks(std::uint32_t s) const {
  const std::uint32_t first = s - s % kSmsPerTpc;
  std::uint32_t n = 0;
  for (std::uint32_t m = first; m < first + kSmsPerTpc && m < sms_.size(); ++m) n += sms_[m].blocks;
  return n;
}

// Hopper's block scheduler spreads a grid over the TPCs before it doubles up on one: a plain
// grid of 8-32 CTAs on an idle H100 / H200 lands one CTA per TPC on even SMs (%smid,
// docs/MEASUREMENTS.md), and CTAs released as a busy GPU frees SMs pile onto those SMs
// (h100_concurrent.csv's stream_sms). So: the SM that fits whose TPC holds the fewest blocks,
// then the SM holding the fewest, then the lowest index.
std::string TbScheduler::blocked_on_room() const {
  for (std::uint32_t li : dispatch_order_) {
    const LaunchState& L = launches_[li];
    if (!L.mine || !L.released || L.done || L.continuation || L.next_cta >= L.ctas) continue;
    const std::uint32_t cta = cta_at(L, L.next_cta);
    if (L.prelaunch && !L.sync_ok[cta]) continue;
    const std::uint32_t first = L.dk->k->dynamic_blocks() ? L.next_logical : cta;
    if (first < L.total && !deps_ready(L, first)) continue;
    const bool pair = L.cluster_ctas == kSmsPerTpc && L.next_cta + 1 < L.ctas;
    if ((pair ? pick_tpc(L) : pick_sm(L)) != ~0u) continue;
    return "launch " + std::to_string(L.index) + " " + quote(L.dk->k->name()) + " cannot place " +
           std::to_string(L.ctas - L.next_cta) + " of its blocks: no SM of its " + std::to_string(L.sm_count) +
           " (gpu.num_sms=" + std::to_string(sms_.size()) + ") has room beside the resident blocks, which wait";
  }
  return {};
}

std::uint32_t TbScheduler::pick_sm(const LaunchState& L) const {
  std::uint32_t best = ~0u, best_tpc = 0, best_sm = 0;
  for (std::uint32_t s = L.sm_first; s < L.sm_first + L.sm_count; ++s) {
    if (!fits(sms_[s], L)) continue;
    const std::uint32_t t = tpc_blocks(s), b = sms_[s].blocks;
    if (best == ~0u || t < best_tpc || (t == best_tpc && b < best_sm)) {
      best = s;
      best_tpc = t;
      best_sm = b;
    }
  }
  return best;
}

// The first SM of the least-loaded TPC inside L's partition whose SMs both fit a CTA of L.
std::uint32_t TbScheduler::pick_tpc(const LaunchState& L) const {
  std::uint32_t best = ~0u, best_load = 0;
  const std::uint32_t end = L.sm_first + L.sm_count;
  for (std::uint32_t s = L.sm_first + L.sm_first % kSmsPerTpc; s + 1 < end; s += kSmsPerTpc) {
    if (!fits(sms_[s], L) || !fits(sms_[s + 1], L)) continue;
    const std::uint32_t load = sms_[s].blocks + sms_[s + 1].blocks;
    if (best == ~0u || load < best_load) {
      best = s;
      best_load = load;
    }
  }
  return best;
}

// The next block of a dynamic kernel's CTA (L.total when none is left): block g + cta mod n of
// the next group g its cluster of n CTAs took, a new group from the counter if its mates have
// not taken one it has yet to begin.
std::uint32_t TbScheduler::next_dynamic_block(LaunchState& L, std::uint32_t cta) {
  const std::uint32_t n = std::max(1u, L.dk->k->cluster_ctas());
  auto& groups = L.dyn_groups[cta / n];
  std::uint32_t& begun = L.dyn_begun[cta];
  if (begun == groups.size()) {
    if (L.next_logical >= L.total) return L.total;
    groups.push_back(L.next_logical);
    L.next_logical += n;
  }
  return std::min(L.total, groups[begun++] + cta % n);
}

}  // namespace cais::gpu
