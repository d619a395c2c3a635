// The NVSwitch router's flit-level switch allocation (net.sw_alloc_granularity=flit): BookSim's
// iq_router without hold_switch_for_packet. See nvswitch.h (kFlitTick) and flit_allocator.h.
//
// Per input VC the head packet streams flit by flit: flit j may cross the crossbar at
// max(known_ps, ready_ps + j * flit_step_ps) (its arrival on the input link, after the head's
// routing/VC/switch-allocation stages), in a cycle where the allocator grants its (input,
// output) pair. The tail's grant ends the packet: its VC buffer space returns upstream as
// credits, it leaves the output xbar_ps + one flit time later, and its downstream VC is free.
//
// Two pipeline rules of BookSim's iq_router that only show under contention (a grant at tick T
// here is BookSim's switch-allocation cycle T - sw_alloc_delay; its updates land at T - 1):
// - A packet behind a tail in the same input VC starts routing only once that tail has left:
//   its head may cross no earlier than T + routing + VC allocation + switch allocation. (Not in
//   the switch's own injection and replication queues, whose packets were routed when made.)
// - VC allocation is BookSim's separable input-first allocator, run in the tick (before switch
//   allocation) for the heads whose pipeline delay ran out and that hold no downstream VC. A
//   VC released by a tail granted at T is seen free by the allocation of cycle T, whose
//   winner crosses at T + VC allocation + switch allocation: here that allocation runs at
//   that later tick (every allocation is shifted by the same stages).
#include <algorithm>

#include "cais/errors.h"
#include "cais/net/nvswitch.h"
#include "cais/sim.h"

namespace cais::net {

void NvSwitch::init_flit_level() {
  const auto inputs = static_cast<std::uint32_t>(in_.size());
  const std::uint32_t ports = num_ports();
  fla_.init(inputs, ports, params_.vcs.vcs + 1);
  flit_ready_.assign(inputs, 0);
  flit_waiting_.assign(inputs, 0);
  flit_is_active_.assign(inputs, 0);
  flit_vcreq_.assign(inputs, 0);
  flit_elig_.assign(inputs, 0);
  flit_elig_outs_.assign(inputs, 0);
  flit_elig_by_out_.assign(static_cast<std::size_t>(inputs) * ports, 0);
  flit_head_.assign(static_cast<std::size_t>(inputs) * (params_.vcs.vcs + 1), FlitHead{});
  flit_vc_request_.assign(flit_head_.size(), FlitVcRequest{});
  flit_active_.clear();
  flit_active_.reserve(inputs);
  vc_alloc_.init(inputs * (params_.vcs.vcs + 1), ports, params_.vcs.vcs);
  grants_.reserve(ports);
  out_slot_.assign(ports, 0);
  out_flit_ps_.assign(ports, 0);
  vc_free_ps_.assign(static_cast<std::size_t>(ports) * params_.vcs.vcs, 0);
  cycle_ps_ = 0;
  for (std::uint32_t o = 0; o < ports; ++o) {
    const PortLink& l = sim_.node(node_).out[o];
    if (!l.connected) continue;
    out_flit_ps_[o] = serialization_ps(params_.flit_bytes, l.bw_gbps);
    if (cycle_ps_ == 0 || out_flit_ps_[o] < cycle_ps_) cycle_ps_ = out_flit_ps_[o];
  }
  if (cycle_ps_ == 0) cycle_ps_ = 1;
  // Internal speedup S: the crossbar and its allocators run S cycles per flit time of the fastest
  // link, and an output takes flits while fewer than S flit times of them wait for its link (a
  // small output buffer), so an input can move up to S flits per flit time to different outputs.
  // S = 1 is BookSim2's iq_router without speedup: an output takes a flit only in the cycle its
  // serialiser frees.
  out_window_ps_ = cycle_ps_ * params_.internal_speedup;
  cycle_ps_ = std::max<TimePs>(1, cycle_ps_ / params_.internal_speedup);
}

// The first time at which output `out` takes a flit again (the tick's busy test: an output
// takes one while its backlog, out_slot_ - now, is under out_window_ps_), as its grants so far
// leave it; later grants only move it on.
TimePs NvSwitch::out_takes_flit_ps(std::uint32_t out) const {
  return out_slot_[out] >= out_window_ps_ ? out_slot_[out] - out_window_ps_ + 1 : 0;
}

void NvSwitch::flit_activate(std::uint32_t in) {
  if (flit_is_active_[in]) return;
  flit_is_active_[in] = 1;
  flit_active_.push_back(in);
}

void NvSwitch::flit_tick_at(TimePs t) {
  const TimePs now = sim_.now();
  t = std::max(t, now);
  t = (t + cycle_ps_ - 1) / cycle_ps_ * cycle_ps_;
  if (in_tick_ && t <= now) t = now + cycle_ps_;
  if (tick_at_ != kNever && tick_at_ >= now && tick_at_ <= t) return;  // an earlier tick covers it
  tick_at_ = t;
  schedule(t, kFlitTick, t);
}

// Flit j of a head may cross at max(known_ps, ready_ps + j * flit_step_ps) (see above).
static TimePs next_flit_ps(const InputEntry& e) {
  return std::max(e.known_ps, e.ready_ps + e.flits_sent * e.flit_step_ps);
}

void NvSwitch::flit_elig_add(std::uint32_t in, std::uint32_t vc, std::uint32_t out) {
  flit_elig_[in] |= 1ull << vc;
  flit_elig_by_out_[static_cast<std::size_t>(in) * num_ports() + out] |= 1ull << vc;
  flit_elig_outs_[in] |= 1ull << out;
}

void NvSwitch::flit_elig_drop(std::uint32_t in, std::uint32_t vc) {
  const std::uint64_t bit = 1ull << vc;
  if (!(flit_elig_[in] & bit)) return;
  flit_elig_[in] &= ~bit;
  const std::uint32_t out = flit_head_[static_cast<std::size_t>(in) * (params_.vcs.vcs + 1) + vc].out;
  std::uint64_t& m = flit_elig_by_out_[static_cast<std::size_t>(in) * num_ports() + out];
  m &= ~bit;
  if (m == 0) flit_elig_outs_[in] &= ~(1ull << out);
}

void NvSwitch::flit_set_ready(std::uint32_t in, std::uint32_t vc, const InputEntry& e) {
  flit_elig_drop(in, vc);  // the tick makes it eligible once its next flit may cross
  flit_ready_[in] |= 1ull << vc;
  FlitHead& f = flit_head_[static_cast<std::size_t>(in) * (params_.vcs.vcs + 1) + vc];
  f.next_ps = next_flit_ps(e);
  f.out = e.out_port;
}

void NvSwitch::flit_head_changed(std::uint32_t in, std::uint32_t vc) {
  InputUnit& iu = in_[in];
  const std::uint64_t bit = 1ull << vc;
  flit_waiting_[in] &= ~bit;
  flit_elig_drop(in, vc);
  flit_ready_[in] &= ~bit;
  flit_vcreq_[in] &= ~bit;
  if (iu.empty(vc)) return;
  InputEntry& e = iu.head(vc);
  flit_activate(in);
  if (e.ready_ps > sim_.now()) {  // the tick at ready_ps allocates its VC
    flit_waiting_[in] |= bit;
    flit_tick_at(e.ready_ps);
    return;
  }
  if (e.out_vc < 0) {  // the tick's VC allocation
    flit_vcreq_[in] |= bit;
    FlitVcRequest& f = flit_vc_request_[static_cast<std::size_t>(in) * (params_.vcs.vcs + 1) + vc];
    f.out = e.out_port;
    f.flits = e.flits;
    f.range = vca_.range_of(sim_.packets()[e.h].type);
    f.valid_until = 0;
    flit_tick_at(sim_.now());
    return;
  }
  flit_set_ready(in, vc, e);
  flit_tick_at(next_flit_ps(e));
}

// Files (in, vc)'s request with the VC allocator: the VCs of its output (and class) that no
// packet holds, with room for the packet, released long enough ago (see above). Returns the
// time to retry when none is usable yet, kNever when it waits for a release or credits.
TimePs NvSwitch::flit_request_vc(std::uint32_t in, std::uint32_t vc, bool& requested) {
  const TimePs t = sim_.now();
  // A router ticks every cycle while flits cross, and a head contending for a busy output would
  // re-read its VCs at each one; what it found holds until a VC is usable or credits move.
  FlitVcRequest& f = flit_vc_request_[static_cast<std::size_t>(in) * (params_.vcs.vcs + 1) + vc];
  const OutputChannel& ch = out_[f.out].channel();
  if (t < f.valid_until && f.epoch == ch.credit_epoch()) return f.soon;
  const std::uint32_t vcs = params_.vcs.vcs;
  const VcRange r = f.range;
  const std::uint32_t* credits = ch.credit_counters();
  const std::uint64_t range_mask = (r.count >= 64 ? ~0ull : (1ull << r.count) - 1) << r.first;
  const TimePs* released = &vc_free_ps_[static_cast<std::size_t>(f.out) * vcs];
  const TimePs alloc_ps = params_.vc_alloc_ps + params_.sw_alloc_ps;
  const std::uint32_t flits = f.flits;
  std::uint64_t free_vcs = 0;
  TimePs soon = kNever;
  bool short_of_credits = false;
  for (std::uint64_t m = range_mask & ~vca_.held_mask(f.out); m; m &= m - 1) {
    const auto v = static_cast<std::uint32_t>(__builtin_ctzll(m));
    if (credits[v] < flits) {
      short_of_credits = true;
      continue;
    }
    const TimePs usable = released[v] + alloc_ps;
    if (usable <= t) free_vcs |= 1ull << v;
    else soon = std::min(soon, usable);
  }
  if (free_vcs) {
    vc_alloc_.request(in * (vcs + 1) + vc, f.out, free_vcs);
    requested = true;
    return t + cycle_ps_;  // a loser retries next cycle
  }
  if (soon == kNever) {
    flit_vcreq_[in] &= ~(1ull << vc);
    wait_for_vc(f.out, in, vc);  // wake_vc_waiters calls head_changed again
    return soon;
  }
  // A VC becomes usable only alloc_ps after a release, and a release from now on comes no
  // earlier than those counted in `soon`; credits come with a new epoch or a filed return.
  f.soon = soon;
  f.valid_until = short_of_credits ? std::min(soon, ch.next_deferred_at()) : soon;
  f.epoch = ch.credit_epoch();
  return soon;
}

void NvSwitch::flit_tick() {
  const TimePs t = sim_.now();
  tick_at_ = kNever;
  in_tick_ = true;
  TimePs next = kNever;
  const std::uint32_t vcs = params_.vcs.vcs;
  // VC allocation (before switch allocation, as in BookSim's cycle).
  bool vc_requested = false;
  for (std::size_t i = 0; i < flit_active_.size(); ++i) {
    const std::uint32_t in = flit_active_[i];
    for (std::uint64_t w = flit_waiting_[in]; w; w &= w - 1) {  // heads whose pipeline delay ran out
      const auto vc = static_cast<std::uint32_t>(__builtin_ctzll(w));
      if (in_[in].head(vc).ready_ps <= t) flit_head_changed(in, vc);
      else next = std::min(next, in_[in].head(vc).ready_ps);
    }
    for (std::uint64_t m = flit_vcreq_[in]; m; m &= m - 1)
      next = std::min(next, flit_request_vc(in, static_cast<std::uint32_t>(__builtin_ctzll(m)), vc_requested));
  }
  if (vc_requested) {
    vc_alloc_.allocate(vc_grants_);
    for (const auto& g : vc_grants_) {
      const std::uint32_t in = g.first / (vcs + 1), vc = g.first % (vcs + 1);
      const std::uint32_t out = g.second / vcs, ovc = g.second % vcs;
      vca_.take(out, ovc);
      InputEntry& e = in_[in].head(vc);
      e.out_vc = static_cast<std::int32_t>(ovc);
      flit_vcreq_[in] &= ~(1ull << vc);
      flit_set_ready(in, vc, e);
    }
    vc_grants_.clear();
  }
  // Switch allocation.
  bool requested = false;
  std::size_t kept = 0;
  const std::uint32_t ports = num_ports();
  // Outputs whose serialiser is still busy next cycle, each looked at once per tick (an output
  // takes a flit in the cycle its serialiser frees in: one slower than the router cycle then
  // sends back to back at its own rate, not one flit per whole number of cycles).
  std::uint64_t outs_seen = 0, outs_busy = 0;
  for (std::size_t i = 0; i < flit_active_.size(); ++i) {
    const std::uint32_t in = flit_active_[i];
    const FlitHead* heads = &flit_head_[static_cast<std::size_t>(in) * (vcs + 1)];
    for (std::uint64_t m = flit_ready_[in] & ~flit_elig_[in]; m; m &= m - 1) {
      const auto vc = static_cast<std::uint32_t>(__builtin_ctzll(m));
      const FlitHead& e = heads[vc];
      if (e.next_ps > t) next = std::min(next, std::max(e.next_ps, out_takes_flit_ps(e.out)));
      else flit_elig_add(in, vc, e.out);  // eligible until it is granted a flit
    }
    const std::uint64_t outs = flit_elig_outs_[in];
    for (std::uint64_t m = outs & ~outs_seen; m; m &= m - 1) {
      const auto out = static_cast<std::uint32_t>(__builtin_ctzll(m));
      if (out_slot_[out] >= t + out_window_ps_) {
        outs_busy |= 1ull << out;
        next = std::min(next, out_takes_flit_ps(out));
      }
    }
    outs_seen |= outs;
    const std::uint64_t* by_out = &flit_elig_by_out_[static_cast<std::size_t>(in) * ports];
    for (std::uint64_t m = outs & ~outs_busy; m; m &= m - 1) {
      const auto out = static_cast<std::uint32_t>(__builtin_ctzll(m));
      fla_.request_vcs(in, by_out[out], out);
      requested = true;
    }
    if (flit_ready_[in] | flit_waiting_[in] | flit_vcreq_[in]) flit_active_[kept++] = in;
    else flit_is_active_[in] = 0;
  }
  flit_active_.resize(kept);
  if (requested) {
    fla_.allocate(grants_);
    for (const FlitGrant& g : grants_) flit_advance(g);
    // The next tick: the first at which a head may be granted a flit, given the grants so far
    // (later grants only delay an output). Losers and winners due within a cycle try again next
    // cycle if their output takes a flit then; with an internal speedup outputs often do not
    // (their backlog is full), and a tick that could grant nothing is not run. A head asking for
    // a VC re-reads its output's VCs and credits every cycle while flits cross (flit_request_vc),
    // so with one the next cycle ticks. Never this cycle again.
    const TimePs next_cycle = t + cycle_ps_;
    for (const FlitGrant& g : grants_)
      if (flit_ready_[g.in] & (1ull << g.vc)) {  // a winner's next flit
        const FlitHead& h = flit_head_[static_cast<std::size_t>(g.in) * (vcs + 1) + g.vc];
        next = std::min(next, std::max(h.next_ps, out_takes_flit_ps(h.out)));
      }
    grants_.clear();
    for (std::size_t i = 0; i < flit_active_.size() && next > next_cycle; ++i) {
      const std::uint32_t in = flit_active_[i];
      if (flit_vcreq_[in]) next = next_cycle;
      for (std::uint64_t m = flit_elig_outs_[in]; m; m &= m - 1)
        next = std::min(next, out_takes_flit_ps(static_cast<std::uint32_t>(__builtin_ctzll(m))));
    }
    next = std::max(next, next_cycle);
  }
  in_tick_ = false;
  if (next != kNever && !flit_active_.empty()) flit_tick_at(next);
}

void NvSwitch::flit_advance(const FlitGrant& g) {
  const TimePs t = sim_.now();
  InputEntry& head = in_[g.in].head(g.vc);
  const TimePs serialised = std::max(out_slot_[g.out], t) + out_flit_ps_[g.out];
  out_slot_[g.out] = serialised;
  if (++head.flits_sent < head.flits) {
    const TimePs next_ps = next_flit_ps(head);
    // Every later tick is a cycle on: a next flit due by then keeps the head eligible.
    if (next_ps > t + cycle_ps_) flit_elig_drop(g.in, g.vc);
    flit_head_[static_cast<std::size_t>(g.in) * (params_.vcs.vcs + 1) + g.vc].next_ps = next_ps;
    return;
  }
  // The tail crossed: the packet leaves the input buffer (credits upstream) and the output.
  const InputEntry e = in_[g.in].pop(sim_, *this, g.vc, t);
  flit_elig_drop(g.in, g.vc);
  flit_ready_[g.in] &= ~(1ull << g.vc);
  const TimePs tail = serialised + params_.xbar_ps;
  const std::uint32_t lines = sim_.packets()[e.h].lines;
  out_[g.out].deliver_tail(sim_, *this, e.h, static_cast<std::uint32_t>(e.out_vc), tail);
  vca_.release(g.out, static_cast<std::uint32_t>(e.out_vc));
  vc_free_ps_[g.out * params_.vcs.vcs + static_cast<std::uint32_t>(e.out_vc)] = t;
  forwarded_ += lines;
  residence_ns_.add(static_cast<double>(tail - std::min(tail, e.tail_ps)) / 1000.0);
  wake_vc_waiters(g.out);
  // The next packet of an input VC is routed only now (see above). The switch's own queues (its
  // multicast copies, responses and merged writes) hold packets routed when they were made, each
  // through the pipeline from its injection: one such queue feeds an output at line rate, as an
  // NVLS multicast must, where a 3 ns bubble per packet would cap it at a third of a 4-lane port.
  const bool switch_made = is_replication_input(g.in) || g.vc == in_[g.in].injection_vc();
  if (!switch_made && !in_[g.in].empty(g.vc)) {
    InputEntry& next = in_[g.in].head(g.vc);
    next.ready_ps = std::max(next.ready_ps, t + params_.pipeline_ps());
  }
  head_changed(g.in, g.vc);
}

}  // namespace cais::net
