// How an issue queue hands out line slots (issue_queue.h: round robin among the resident
// blocks' ops), what blocks an op's next line (a THROTTLE hold, the mergeable cap, the
// outstanding limit, a store's port credits), and how cut lines become packets (bulk packets
// per op and plane). Part of RemotePacketizer (remote_packetizer.h).
#include <algorithm>

#include "cais/gpu/local_memory.h"
#include "cais/gpu/nvlink_ports.h"
#include "cais/gpu/remote_packetizer.h"
#include "cais/gpu/remote_read_cache.h"
#include "cais/gpu/tb_scheduler.h"

namespace cais::gpu {

// Turns go round the queue's rotation from its cursor: the first op that can cut a line takes
// up to N of them (N = the bulk packet's lines; 1 without bulk packets), the cursor moves past
// it, and the next turn starts there. A slot freed by a response goes to the next op in turn.
void RemotePacketizer::pump(std::uint32_t qi) {
  IssueQueue& q = queues_[qi];
  const std::uint32_t turn = bulk_lines(qi);
  for (;;) {
    bool went = false, past_held = false;
    bool seen[6] = {};  // Blocked reasons met in this round
    for (std::size_t k = 0; k < q.rotating() && !went; ++k) {
      const std::uint32_t oi = q.at(k);
      std::uint32_t cut = 0;
      Blocked why = Blocked::kNo;
      while (cut < turn && !ops_[oi].all_issued && (why = blocked(qi, oi)) == Blocked::kNo) {
        cut_line(qi, oi);
        ++cut;
      }
      if (cut == 0) {
        seen[static_cast<int>(why)] = true;
        past_held |= why == Blocked::kHeld;
        continue;
      }
      went = true;
      if (past_held) ++throttle_bypasses_;
      q.turn_taken(k);
      if (ops_[oi].all_issued) q.pop(oi);
    }
    if (went) continue;
    // No op can go: each waits for what blocks it (lift, response / ack, response, credit).
    throttle_stalls_ += seen[static_cast<int>(Blocked::kHeld)];
    cap_stalls_ += seen[static_cast<int>(Blocked::kCap)];
    outstanding_stalls_ += seen[static_cast<int>(Blocked::kLimit)];
    post_credit_stalls_ += seen[static_cast<int>(Blocked::kPostRoom)];
    sm_port_stalls_ += seen[static_cast<int>(Blocked::kSmPort)];
    return;
  }
}

RemotePacketizer::Blocked RemotePacketizer::blocked(std::uint32_t qi, std::uint32_t oi) {
  RemoteOp& op = ops_[oi];
  // A THROTTLE holds only its group's TB (spec 3.5 step 3). Lines of a held op already in its
  // bulk packets wait with it: sending them short would group them unlike the other GPUs.
  if (!throttled_groups_.empty() && hold(op)) {
    if (op.fill_key) held_fetches_[op.fill_key] = qi;  // a block joining it resumes it (joined)
    return Blocked::kHeld;
  }
  if (counts_toward_cap(op) && mergeable_ >= ctx_.cfg.mergeable_cap_lines) {
    if (!cap_waiting_[qi]) {
      cap_waiting_[qi] = 1;
      cap_waiters_.push_back(qi);
    }
    return Blocked::kCap;  // resumed by a response or CAIS_RED_ACK (retire_mergeable)
  }
  if (sends_sm_data(op)) {
    if (!op.port_booked) {  // the op's bytes join the port's queue when its first line may go
      op.port_booked = true;
      op.port_end = ctx_.mem->sm_store(ctx_.now(), qi, op.port_total);
    }
    if (sm_port_free_at_[qi] > ctx_.now()) {  // the last packet's bytes have not crossed yet
      if (!sm_port_wake_at_[qi] || sm_port_free_at_[qi] < sm_port_wake_at_[qi]) {  // one wake: the earliest
        sm_port_wake_at_[qi] = sm_port_free_at_[qi];
        ctx_.schedule(sm_port_free_at_[qi], kSmPortFree, 0, qi);
      }
      return Blocked::kSmPort;
    }
  }
  const bool store = posted_store(op);
  const bool posted = op.type == proto::PKT_CAIS_RED || store;  // red.cais: complete on the wire
  if (!posted && queues_[qi].outstanding >= limit(qi)) return Blocked::kLimit;  // resumed by a response
  if (!store) return Blocked::kNo;
  NvlinkPorts& ports = *ctx_.ports;
  if (!line_flits_) line_flits_ = ports.flits(ctx_.cfg.max_packet_bytes);
  const std::uint32_t port = next_line_port(op);
  if (ports.post_room(port, line_flits_)) return Blocked::kNo;
  // The op's lines held for bulk packets go now: they hold reserved flits, which a stalled op
  // must not keep from the other queues (nor from its own queue).
  send_all_bulk(oi);
  if (post_waiters_.empty()) {
    post_waiters_.resize(ports.num_ports());
    post_waiting_.assign(queues_.size() * ports.num_ports(), 0);
  }
  std::uint8_t& waiting = post_waiting_[static_cast<std::size_t>(qi) * ports.num_ports() + port];
  if (!waiting) {
    waiting = 1;
    post_waiters_[port].push_back(qi);
  }
  ports.rearm(port);
  return Blocked::kPostRoom;  // resumed by a credit on that port (resume_posted)
}

void RemotePacketizer::cut_line(std::uint32_t qi, std::uint32_t oi) {
  RemoteOp& op = ops_[oi];
  const bool store = posted_store(op);
  std::uint64_t addr = 0;
  std::uint32_t bytes = 0;
  bool whole = false;
  next_packet(op, addr, bytes, whole);
  if (store) ctx_.ports->reserve_post(ctx_.ports->plane(addr), ctx_.ports->flits(bytes));
  if (!store && op.type != proto::PKT_CAIS_RED) ++queues_[qi].outstanding;
  if (counts_toward_cap(op)) mergeable_high_water_ = std::max(mergeable_high_water_, ++mergeable_);
  if (op.flag || bulk_lines(qi) == 1) {
    ++op.pending;
    emit(op, oi, &addr, 1, bytes);
    return;
  }
  const bool last = op.all_issued;
  add_line(qi, oi, addr, bytes, whole);
  if (last) send_all_bulk(oi);
}

std::uint32_t RemotePacketizer::next_line_port(const RemoteOp& op) const {
  const std::uint64_t a = op.addr + static_cast<std::uint64_t>(op.row) * op.row_stride + op.col;
  return ctx_.ports->plane(a & ~31ull);  // next_packet's packet address: the sector of its first byte
}

void RemotePacketizer::resume_posted(std::uint32_t port) {
  if (post_waiters_.empty()) return;
  std::deque<std::uint32_t>& w = post_waiters_[port];
  // Oldest first; a queue that stalls again goes to the back of the FIFO of the port it waits on.
  for (std::size_t n = w.size(); n > 0 && !w.empty() && ctx_.ports->post_room(port, line_flits_); --n) {
    const std::uint32_t qi = w.front();
    w.pop_front();
    post_waiting_[static_cast<std::size_t>(qi) * post_waiters_.size() + port] = 0;
    pump(qi);
  }
}

std::uint32_t RemotePacketizer::bulk_lines(std::uint32_t qi) {
  const bool dma = qi == ctx_.cfg.num_sms;
  std::uint32_t& n = bulk_cap_[dma ? 1 : 0];
  if (n) return n;
  n = ctx_.cfg.bulk_lines;
  if (n > 1) {
    NvlinkPorts& ports = *ctx_.ports;
    planes_ = ports.num_ports();
    const std::uint32_t lim = limit(qi);
    // Lines held back (at most planes x (N-1)) must leave one request in flight to pump again.
    n = std::min(n, (lim - 1) / std::max<std::uint32_t>(1, planes_) + 1);
    // A bulk packet takes VC buffer for all its lines at once, so N-line bulks may leave a VC
    // emptier than single lines would; where that leaves a class of few VCs (traffic control's
    // reductions) short of its credit loop, N shrinks until the VCs hold what single lines
    // hold or the loop needs (docs/PERFORMANCE.md, "Bulk packets").
    const std::uint32_t line_flits = ports.flits(ctx_.cfg.max_packet_bytes);
    while (n > 1 && !ports.bulk_keeps_credit_loop(n, line_flits)) --n;
    // Mergeable lines held back by all SM queues (< num_sms x planes x N) must stay below the
    // per-GPU cap, so that a stalled GPU always has lines in flight whose acks resume it.
    if (!dma && ctx_.cfg.mergeable_cap_lines)
      n = std::min(n, (ctx_.cfg.mergeable_cap_lines - 1) / (ctx_.cfg.num_sms * std::max<std::uint32_t>(1, planes_)) + 1);
    // Each op a queue cuts at once holds back at most planes x (N-1) lines: so many ops that
    // their held lines stay below the limit (and the cap, over all SM queues). N as capped
    // above leaves room for one at least.
    if (n > 1) {
      const std::size_t per_op = static_cast<std::size_t>(std::max<std::uint32_t>(1, planes_)) * (n - 1);
      std::size_t open = (lim - 1) / per_op;
      if (!dma && ctx_.cfg.mergeable_cap_lines)
        open = std::min<std::size_t>(open, (ctx_.cfg.mergeable_cap_lines - 1) / (per_op * ctx_.cfg.num_sms));
      for (std::uint32_t q = 0; q < queues_.size(); ++q)
        if ((q == ctx_.cfg.num_sms) == dma) queues_[q].set_open_limit(open);
    }
  }
  return n;
}

// A new bulk packet counts as pending for its op from its first line, so that the op cannot
// complete while lines of it wait here.
void RemotePacketizer::add_line(std::uint32_t qi, std::uint32_t oi, std::uint64_t addr, std::uint32_t bytes,
                                bool whole) {
  const std::uint32_t plane = ctx_.ports->plane(addr);
  RemoteOp& op = ops_[oi];
  // A part of a line (rows or K steps that are not whole lines) may share its line with another
  // op's, so it goes alone: every GPU then sends that line in a packet of one shape, whichever
  // op's bulk it would have joined (the merge unit matches a bulk request by its lines).
  if (!whole && merged_in_switch(op)) {
    ++op.pending;
    emit(op, oi, &addr, 1, bytes);
    return;
  }
  if (op.bulk.size() < planes_) op.bulk.resize(planes_);
  BulkLines& b = op.bulk[plane];
  if (b.lines && b.line_bytes != bytes) send_bulk(oi, plane);
  if (b.lines == 0) {
    ++op.pending;
    b.line_bytes = bytes;
  }
  b.addr[b.lines++] = addr;
  if (b.lines == bulk_lines(qi)) send_bulk(oi, plane);
}

void RemotePacketizer::send_bulk(std::uint32_t oi, std::uint32_t plane) {
  BulkLines& b = ops_[oi].bulk[plane];
  const std::uint32_t lines = b.lines;
  b.lines = 0;
  emit(ops_[oi], oi, b.addr.data(), lines, b.line_bytes);
}

void RemotePacketizer::send_all_bulk(std::uint32_t oi) {
  for (std::uint32_t plane = 0; plane < ops_[oi].bulk.size(); ++plane)
    if (ops_[oi].bulk[plane].lines) send_bulk(oi, plane);
}

// The 32 B sectors touched in one max_packet_bytes line, across consecutive rows while they
// stay in that line (coalescing). Marks the op all_issued when its last row is cut.
void RemotePacketizer::next_packet(RemoteOp& op, std::uint64_t& addr, std::uint32_t& bytes, bool& whole) {
  const std::uint64_t line = ctx_.cfg.max_packet_bytes;
  std::uint64_t line_no = ~0ull, mask = 0, covered = 0;
  for (;;) {
    const std::uint64_t row_start = op.addr + static_cast<std::uint64_t>(op.row) * op.row_stride;
    const std::uint64_t a = row_start + op.col;
    if (line_no != ~0ull && a / line != line_no) break;
    line_no = a / line;
    const std::uint64_t chunk_end = std::min(row_start + op.row_bytes, (line_no + 1) * line);
    for (std::uint64_t sct = (a % line) / 32; sct <= ((chunk_end - 1) % line) / 32; ++sct) mask |= 1ull << sct;
    covered += chunk_end - a;
    op.col += static_cast<std::uint32_t>(chunk_end - a);
    if (op.col < op.row_bytes) break;  // the row continues in the next line
    op.col = 0;
    if (++op.row >= op.rows) {
      op.all_issued = true;
      break;
    }
  }
  addr = line_no * line + 32ull * static_cast<std::uint64_t>(__builtin_ctzll(mask));
  bytes = static_cast<std::uint32_t>(32 * __builtin_popcountll(mask));
  whole = covered == line;
}

// A THROTTLE names one TB group and holds only it (spec 3.5 step 3). A fetch for the remote
// read cache (gpu.cache_remote_reads) that blocks of other groups have joined (a row of an
// AG-GEMM's tiles sharing one chunk) serves their groups as much as its own. On hardware the
// held block's request would not have left the SM, so a joiner's own request would miss in L2
// and go out under the joiner's group: the fetch goes on under the first group no switch
// throttles, the fetching block's own (once lifted) before its joiners' in join order, and the
// switch counts and throttles that group next, so a row's groups are held one by one. Only when
// all of these groups are throttled is the fetch held.
// (Holding the whole row behind one throttled tile cost 32-GPU layers 20 %, docs/RESULTS.md,
// Fig 17; letting any joined fetch go left the joiners' groups uncounted, Fig 13.)
bool RemotePacketizer::hold(RemoteOp& op) {
  if ((op.op != isa::LD_CAIS && op.op != isa::RED_CAIS) || !throttled_groups_.count(op.group)) return false;
  const std::vector<RemoteReadCache::Joiner>* waiting = op.fill_key ? ctx_.rcache->joiners(op.fill_key) : nullptr;
  if (!waiting) return true;
  const auto go_on_under = [&](std::uint32_t g) {
    if (throttled_groups_.count(g)) return false;
    op.group = g;
    ++retagged_fetches_;
    return true;
  };
  if (go_on_under(ctx_.sched->tb(op.tb).group)) return false;  // the fetching block's own, lifted
  for (const RemoteReadCache::Joiner& j : *waiting)
    if (go_on_under(ctx_.sched->tb(j.tbi).group)) return false;
  return true;
}

void RemotePacketizer::joined(std::uint64_t fill_key) {
  const auto it = held_fetches_.find(fill_key);
  if (it == held_fetches_.end()) return;
  const std::uint32_t qi = it->second;
  held_fetches_.erase(it);
  pump(qi);
}

// No new mergeable request of a group while any switch throttles it (feature_cais_merge.h).
// A hold ends at THROTTLE aux = 0 or after its aux ns, whichever comes first: the switch sends
// no lift for a hold that has run out.
void RemotePacketizer::throttle(std::uint32_t sw, std::uint32_t group, bool on, TimePs hold_ps) {
  ++throttles_;
  const std::uint64_t key = (static_cast<std::uint64_t>(sw) << 32) | group;
  if (!on) return lift(key);
  const TimePs until = ctx_.now() + hold_ps;
  auto [it, fresh] = throttle_until_.try_emplace(key, until);
  if (fresh) ++throttled_groups_[group];
  it->second = until;
  ctx_.schedule(until, kThrottleExpiry, key);
}

void RemotePacketizer::hold_expired(std::uint64_t key) {
  auto it = throttle_until_.find(key);
  if (it != throttle_until_.end() && it->second <= ctx_.now()) lift(key);
}

void RemotePacketizer::lift(std::uint64_t key) {
  if (!throttle_until_.erase(key)) return;
  const auto group = static_cast<std::uint32_t>(key);
  if (--throttled_groups_[group] == 0) {
    throttled_groups_.erase(group);
    if (throttled_groups_.empty()) held_fetches_.clear();
    for (std::uint32_t q = 0; q < queues_.size(); ++q)
      if (!queues_[q].empty()) pump(q);
  }
}

}  // namespace cais::gpu
