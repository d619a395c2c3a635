// The CAIS merge unit's table: lookup, allocation with LRU eviction, release, and the entry
// timeouts that flush what waits too long. The rules are stated in cais/net/feature_cais_merge.h.
#include <algorithm>

#include "cais/errors.h"
#include "cais/net/feature_cais_merge.h"

namespace cais::net {

std::int32_t CaisMergeUnit::find(std::uint64_t addr, Kind k) const {
  const auto kind = static_cast<std::uint32_t>(k);
  for (std::size_t i = cam_home(addr, kind);; i = (i + 1) & cam_mask_) {
    const CamSlot& c = cam_[i];
    if (c.idx < 0) return -1;
    if (c.addr == addr && c.kind == kind) return c.idx;
  }
}

void CaisMergeUnit::check_lines(SwitchContext& ctx, const Entry& e, const Packet& p) const {
  bool same = e.lines == p.lines;
  for (std::uint32_t i = 0; same && i + 1 < e.lines; ++i) same = e.more_lines[i] == p.more_lines[i];
  if (!same)
    throw InvariantError(ctx.name() + ": a CAIS request for addr " + std::to_string(p.addr) + " carries " +
                         std::to_string(p.lines) + " lines that differ from its merge entry's " +
                         std::to_string(e.lines) + " (GPUs grouped one tile's lines differently; gpu.bulk_lines=1 " +
                         "sends single lines)");
}

std::int32_t CaisMergeUnit::allocate(SwitchContext& ctx, std::uint32_t tbl, std::uint64_t addr, Kind k,
                                     std::uint32_t bytes, std::uint32_t lines) {
  Table& t = tables_[tbl];
  if (!cfg_.unlimited && (bytes > cfg_.table_bytes || lines > cfg_.table_entries)) return -1;  // can never fit
  while (!cfg_.unlimited &&
         (t.st.live_entries + lines > cfg_.table_entries || t.st.live_bytes + bytes > cfg_.table_bytes)) {
    const std::int32_t victim = t.head;  // least recently used
    Entry& v = entries_[victim];
    if (v.state == State::kLoadWait) {
      // Not evictable before its data arrives: evict it on fill; this request bypasses.
      if (!v.evict_on_fill) {
        v.evict_on_fill = true;
        t.st.deferred_evictions += v.lines;
      }
      return -1;
    }
    evict(ctx, victim, false);
  }
  const std::int32_t idx = take_free_slot();
  Entry& e = entries_[idx];
  e.state = State::kReduction;  // set properly by the caller
  e.timer_pending = false;
  e.evict_on_fill = false;
  e.table = tbl;
  e.addr = addr;
  e.lines = lines;
  e.line_bytes = bytes;
  e.data_src = 0;
  e.waiters.clear();
  e.values.clear();
  e.members.clear();
  e.contributors.clear();
  e.requesters.clear();
  e.distinct = 0;
  e.prev = t.tail;
  e.next = -1;
  if (t.tail >= 0) entries_[t.tail].next = idx;
  else t.head = idx;
  t.tail = idx;
  t.st.live_entries += lines;
  t.st.live_bytes += bytes;
  t.st.high_water_entries = std::max(t.st.high_water_entries, t.st.live_entries);
  t.st.high_water_bytes = std::max(t.st.high_water_bytes, t.st.live_bytes);
  const auto ki = static_cast<std::size_t>(k);
  t.st.occupancy_change(ki, ctx.now());
  t.st.kind_live_entries[ki] += lines;
  if (t.st.kind_live_entries[ki] > t.st.kind_high_water_entries[ki]) {
    t.st.kind_high_water_entries[ki] = t.st.kind_live_entries[ki];
    t.st.kind_high_water_ps[ki] = ctx.now();
  }
  cam_insert(addr, static_cast<std::uint32_t>(k), idx);
  ++live_;
  return idx;
}

void CaisMergeUnit::evict(SwitchContext& ctx, std::int32_t idx, bool timeout) {
  Entry& e = entries_[idx];
  Table& t = tables_[e.table];
  if (timeout) t.st.timeouts += e.lines;
  else t.st.evictions += e.lines;
  if (e.state == State::kReduction) flush_reduction(ctx, idx, false);
  release(ctx, idx);
}

void CaisMergeUnit::release(SwitchContext& ctx, std::int32_t idx) {
  Entry& e = entries_[idx];
  Table& t = tables_[e.table];
  const std::size_t ki = e.state == State::kReduction ? 1 : 0;
  const double wait_ns = static_cast<double>(e.last_req_ps - e.first_req_ps) / 1000.0;
  const double life_ns = static_cast<double>(ctx.now() - e.first_req_ps) / 1000.0;
  for (std::uint32_t i = 0; i < e.lines; ++i) {
    t.st.add_wait(wait_ns);
    t.st.kind_wait_ns[ki].add(wait_ns);
    t.st.kind_life_ns[ki].add(life_ns);
  }
  t.st.occupancy_change(ki, ctx.now());
  t.st.kind_live_entries[ki] -= e.lines;
  leave_all(ctx, e);
  unlink(idx);
  cam_erase(e.addr, static_cast<std::uint32_t>(e.state == State::kReduction ? Kind::kReduction : Kind::kLoad));
  t.st.live_entries -= e.lines;
  t.st.live_bytes -= e.line_bytes;
  e.state = State::kFree;
  ++e.gen;  // pending timers of this slot become stale
  e.timer_pending = false;
  free_.push_back(idx);
  --live_;
}

void CaisMergeUnit::unlink(std::int32_t idx) {
  Entry& e = entries_[idx];
  Table& t = tables_[e.table];
  if (e.prev >= 0) entries_[e.prev].next = e.next;
  else t.head = e.next;
  if (e.next >= 0) entries_[e.next].prev = e.prev;
  else t.tail = e.prev;
  e.prev = e.next = -1;
}

void CaisMergeUnit::touch(std::int32_t idx) {
  Entry& e = entries_[idx];
  Table& t = tables_[e.table];
  if (t.tail == idx) return;
  unlink(idx);
  e.prev = t.tail;
  e.next = -1;
  if (t.tail >= 0) entries_[t.tail].next = idx;
  else t.head = idx;
  t.tail = idx;
}

// ------------------------------------------------------------------ timeouts

void CaisMergeUnit::arm_timer(SwitchContext& ctx, std::int32_t idx) {
  Entry& e = entries_[idx];
  if (e.timer_pending) return;
  e.timer_pending = true;
  ctx.schedule_timer(e.last_access_ps + cfg_.timeout_ps, feature_index_,
                     (static_cast<std::uint64_t>(idx) << 32) | e.gen);
}

void CaisMergeUnit::on_timer(SwitchContext& ctx, std::uint64_t arg) {
  if (arg & kHoldTimer) return hold_ran_out(ctx, arg);
  const auto idx = static_cast<std::int32_t>(arg >> 32);
  const auto gen = static_cast<std::uint32_t>(arg & 0xffffffffu);
  if (idx < 0 || static_cast<std::size_t>(idx) >= entries_.size()) return;
  Entry& e = entries_[idx];
  if (e.state == State::kFree || e.gen != gen) return;  // released since
  e.timer_pending = false;
  if (e.state == State::kLoadWait) return;  // its fill re-arms
  if (ctx.now() >= e.last_access_ps + cfg_.timeout_ps) {
    evict(ctx, idx, true);
  } else {
    arm_timer(ctx, idx);  // accessed since: wait for the rest of the interval
  }
}

}  // namespace cais::net
