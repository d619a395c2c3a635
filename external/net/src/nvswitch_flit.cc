// The NVSwitch router's flit-level switch allocation (net.sw_alloc_granularity=flit): BookSim's
// iq_router without hold_switch_for_packet. See nvswitch.h (kFlitTick) and flit_allocator.h.
//
// Per input VC the head packet streams flit by flit: flit j may cross the crossbar at
// max(known_ps, ready_ps + j * flit_step_ps) (its arrival on the input link, after the head's
// routing/VC/switch-allocation stages), in a cycle where the allocator grants its (input,
// output) pair. The tail's grant ends the packet: its VC buffer space returns upstream as
// credits, it leaves the output xbar_ps + one flit time later, and its downstream VC is free.
#include <algorithm>

#include "cais/errors.h"
#include "cais/net/nvswitch.h"
#include "cais/sim.h"

namespace cais::net {

void NvSwitch::init_flit_level() {
  const auto inputs = static_cast<std::uint32_t>(in_.size());
  const std::uint32_t ports = num_ports();
  fla_.init(inputs, ports, params_.vcs_per_port + 1);
  flit_ready_.assign(inputs, 0);
  flit_waiting_.assign(inputs, 0);
  flit_is_active_.assign(inputs, 0);
  flit_active_.clear();
  flit_active_.reserve(inputs);
  grants_.reserve(ports);
  out_slot_.assign(ports, 0);
  out_flit_ps_.assign(ports, 0);
  cycle_ps_ = 0;
  for (std::uint32_t o = 0; o < ports; ++o) {
    const PortLink& l = sim_.node(node_).out[o];
    if (!l.connected) continue;
    out_flit_ps_[o] = serialization_ps(params_.flit_bytes, l.bw_gbps);
    if (cycle_ps_ == 0 || out_flit_ps_[o] < cycle_ps_) cycle_ps_ = out_flit_ps_[o];
  }
  if (cycle_ps_ == 0) cycle_ps_ = 1;
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

void NvSwitch::flit_head_changed(std::uint32_t in, std::uint32_t vc) {
  InputUnit& iu = in_[in];
  const std::uint64_t bit = 1ull << vc;
  flit_waiting_[in] &= ~bit;
  flit_ready_[in] &= ~bit;
  if (iu.empty(vc)) return;
  InputEntry& e = iu.head(vc);
  flit_activate(in);
  if (e.ready_ps > sim_.now()) {  // the tick at ready_ps allocates its VC
    flit_waiting_[in] |= bit;
    flit_tick_at(e.ready_ps);
    return;
  }
  if (e.out_vc < 0) {
    const std::int32_t v = vca_.allocate(e.out_port, out_[e.out_port].channel(), sim_.packets()[e.h].type, e.flits);
    if (v < 0) {
      vca_.wait(e.out_port, in, vc);  // wake_vc_waiters calls head_changed again
      return;
    }
    e.out_vc = v;
  }
  flit_ready_[in] |= bit;
  flit_tick_at(std::max(e.known_ps, e.ready_ps + e.flits_sent * e.flit_step_ps));
}

void NvSwitch::flit_tick() {
  const TimePs t = sim_.now();
  tick_at_ = kNever;
  in_tick_ = true;
  TimePs next = kNever;
  bool requested = false;
  std::size_t kept = 0;
  for (std::size_t i = 0; i < flit_active_.size(); ++i) {
    const std::uint32_t in = flit_active_[i];
    for (std::uint64_t w = flit_waiting_[in]; w; w &= w - 1) {  // heads whose pipeline delay ran out
      const auto vc = static_cast<std::uint32_t>(__builtin_ctzll(w));
      if (in_[in].head(vc).ready_ps <= t) flit_head_changed(in, vc);
      else next = std::min(next, in_[in].head(vc).ready_ps);
    }
    for (std::uint64_t m = flit_ready_[in]; m; m &= m - 1) {
      const auto vc = static_cast<std::uint32_t>(__builtin_ctzll(m));
      const InputEntry& e = in_[in].head(vc);
      const TimePs avail = std::max(e.known_ps, e.ready_ps + e.flits_sent * e.flit_step_ps);
      if (avail > t) {
        next = std::min(next, avail);
        continue;
      }
      if (out_slot_[e.out_port] > t) {
        next = std::min(next, out_slot_[e.out_port]);
        continue;
      }
      fla_.request(in, vc, e.out_port);
      requested = true;
    }
    if (flit_ready_[in] | flit_waiting_[in]) flit_active_[kept++] = in;
    else flit_is_active_[in] = 0;
  }
  flit_active_.resize(kept);
  if (requested) {
    fla_.allocate(grants_);
    for (const FlitGrant& g : grants_) flit_advance(g);
    grants_.clear();
    next = t + cycle_ps_;  // losers (and the winners' next flits) try again next cycle
  }
  in_tick_ = false;
  if (next != kNever && !flit_active_.empty()) flit_tick_at(next);
}

void NvSwitch::flit_advance(const FlitGrant& g) {
  const TimePs t = sim_.now();
  InputEntry& head = in_[g.in].head(g.vc);
  out_slot_[g.out] = t + out_flit_ps_[g.out];
  if (++head.flits_sent < head.flits) return;
  // The tail crossed: the packet leaves the input buffer (credits upstream) and the output.
  const InputEntry e = in_[g.in].pop(sim_, *this, g.vc, t);
  flit_ready_[g.in] &= ~(1ull << g.vc);
  const TimePs tail = t + params_.xbar_ps + out_flit_ps_[g.out];
  const std::uint32_t lines = sim_.packets()[e.h].lines;
  out_[g.out].deliver_tail(sim_, *this, e.h, static_cast<std::uint32_t>(e.out_vc), tail);
  vca_.release(g.out, static_cast<std::uint32_t>(e.out_vc));
  forwarded_ += lines;
  residence_ns_.add(static_cast<double>(tail - std::min(tail, e.tail_ps)) / 1000.0);
  wake_vc_waiters(g.out);
  head_changed(g.in, g.vc);
}

}  // namespace cais::net
