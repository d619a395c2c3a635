// The CAIS merge unit's throttling (pre-access coordination): the GPUs that joined an entry's
// group, the holds a THROTTLE puts on a GPU that runs ahead, their renewal and release. The
// rules are stated in cais/net/feature_cais_merge.h.
#include <algorithm>

#include "cais/errors.h"
#include "cais/net/feature_cais_merge.h"

namespace cais::net {

void CaisMergeUnit::join(SwitchContext& ctx, Entry& e, std::uint32_t gpu) {
  if (!cfg_.throttle) return;
  if (e.members.empty()) group_link(static_cast<std::int32_t>(&e - entries_.data()));
  e.members.push_back(gpu);
  asked_[e.group].insert(gpu);
  Ahead& a = ahead_[PairKey{e.group, gpu}];
  a.n += e.lines;
  // Throttle (again, if an earlier hold has run out) while the GPU is too far ahead.
  if (a.n > cfg_.throttle_ahead_entries && (!a.throttled || ctx.now() >= a.until)) {
    set_throttled(a, gpu, true);
    hold(ctx, a, e.group, gpu);
  }
}

// A group's head stays in the map when its list empties (-1), so that entries coming and going
// allocate no map nodes.
void CaisMergeUnit::group_link(std::int32_t idx) {
  Entry& e = entries_[idx];
  std::int32_t& head = group_head_.try_emplace(e.group, -1).first->second;
  e.group_prev = -1;
  e.group_next = head;
  if (head >= 0) entries_[head].group_prev = idx;
  head = idx;
}

void CaisMergeUnit::group_unlink(std::int32_t idx) {
  Entry& e = entries_[idx];
  if (e.group_next >= 0) entries_[e.group_next].group_prev = e.group_prev;
  if (e.group_prev >= 0) {
    entries_[e.group_prev].group_next = e.group_next;
  } else {
    group_head_.at(e.group) = e.group_next;
  }
  e.group_prev = e.group_next = -1;
}

void CaisMergeUnit::set_throttled(Ahead& a, std::uint32_t gpu, bool on) {
  if (a.throttled == on) return;
  a.throttled = on;
  if (gpu >= throttled_of_gpu_.size()) throttled_of_gpu_.resize(gpu + 1);
  auto& v = throttled_of_gpu_[gpu];
  if (on) {
    v.push_back(&a);
  } else {
    v.erase(std::find(v.begin(), v.end(), &a));
  }
}

bool CaisMergeUnit::held_anywhere(TimePs now, std::uint32_t gpu) const {
  if (gpu >= throttled_of_gpu_.size()) return false;
  for (const Ahead* a : throttled_of_gpu_[gpu])
    if (now < a->until) return true;
  return false;
}

void CaisMergeUnit::hold(SwitchContext& ctx, Ahead& a, std::uint32_t group, std::uint32_t gpu) {
  a.until = ctx.now() + cfg_.throttle_hold_ps;
  send_throttle(ctx, gpu, group, true);
  ctx.schedule_timer(a.until, feature_index_, kHoldTimer | (static_cast<std::uint64_t>(gpu) << 32) | group);
}

// Renewing every hold until lifted kept Fig 13's leader from bursting after each hold, but held
// GPUs then waited on each other's held blocks until the entries timed out (whole layers up to
// 23 % slower, docs/RESULTS.md, Fig 13); renewing only while an unheld peer can catch up keeps
// the one and not the other.
void CaisMergeUnit::hold_ran_out(SwitchContext& ctx, std::uint64_t arg) {
  const auto group = static_cast<std::uint32_t>(arg & 0xffffffffu);
  const auto gpu = static_cast<std::uint32_t>((arg & ~kHoldTimer) >> 32);
  auto it = ahead_.find(PairKey{group, gpu});
  // Lifted since, or a later hold is running (it has its own timer).
  if (it == ahead_.end() || !it->second.throttled || ctx.now() < it->second.until) return;
  if (waits_for_a_free_peer(ctx, group, gpu)) {
    ++holds_renewed_;
    hold(ctx, it->second, group, gpu);
  } else {
    ++holds_lapsed_;
  }
}

bool CaisMergeUnit::waits_for_a_free_peer(SwitchContext& ctx, std::uint32_t group,
                                          std::uint32_t gpu) const {
  const auto head = group_head_.find(group);
  if (head == group_head_.end()) return false;
  const std::uint32_t n = ctx.num_gpus();
  const TimePs now = ctx.now();
  const RequesterSet& asked = asked_.at(group);
  auto is_free = [&](std::uint32_t p) {
    if (!asked.contains(p)) return !held_anywhere(now, p);  // its block may still need an SM
    const auto it = ahead_.find(PairKey{group, p});
    return it == ahead_.end() || !it->second.throttled || now >= it->second.until;
  };
  // An entry's requesters are its members (join() follows each new requester).
  for (std::int32_t idx = head->second; idx >= 0; idx = entries_[idx].group_next) {
    const Entry& e = entries_[idx];
    if (!e.requesters.contains(gpu)) continue;
    for (std::uint32_t p = 0; p < n; ++p) {
      if (p == gpu || (e.expected < n && p == e.home)) continue;  // the owner does not ask for its own line
      if (!e.requesters.contains(p) && is_free(p)) return true;
    }
  }
  return false;
}

void CaisMergeUnit::leave_all(SwitchContext& ctx, Entry& e) {
  if (!e.members.empty()) group_unlink(static_cast<std::int32_t>(&e - entries_.data()));
  for (const std::uint32_t gpu : e.members) {
    auto it = ahead_.find(PairKey{e.group, gpu});
    if (it == ahead_.end() || it->second.n < e.lines)
      throw InvariantError(ctx.name() + ": merge unit throttle count underflow");
    Ahead& a = it->second;
    a.n -= e.lines;
    if (a.throttled && a.n <= cfg_.throttle_resume_entries) {
      set_throttled(a, gpu, false);
      // Lift a hold that is still running; one that ran out needs no message.
      if (ctx.now() < a.until) send_throttle(ctx, gpu, e.group, false);
    }
    if (a.n == 0 && !a.throttled) ahead_.erase(it);
  }
  e.members.clear();
}

void CaisMergeUnit::send_throttle(SwitchContext& ctx, std::uint32_t gpu, std::uint32_t group, bool on) {
  const PacketHandle r = ctx.new_control_packet(proto::PKT_THROTTLE, node_, gpu, cfg_.shape.flits(0));
  Packet& q = ctx.packet(r);
  q.group = group;
  // aux = how long the GPU should hold mergeable requests (ns); 0 lifts the hold.
  q.aux = on ? static_cast<std::uint32_t>((cfg_.throttle_hold_ps + 999) / 1000) : 0;
  if (on) ++throttles_sent_;
  else ++unthrottles_sent_;
  emit(ctx, r);
}

}  // namespace cais::net
