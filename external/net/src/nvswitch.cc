// The NVSwitch router node; stage logic lives in input_unit, vc_allocator, switch_allocator,
// output_unit and routing_table. See nvswitch.h for the event flow.
#include "cais/net/nvswitch.h"

#include <algorithm>
#include <sstream>

#include "cais/engine_host.h"
#include "cais/errors.h"
#include "cais/params.h"
#include "cais/sim.h"

namespace cais::net {


NvSwitch::NvSwitch(Sim& sim, std::uint32_t node)
    : NodeComponent(sim, sim.node(node).name, node << 8), node_(node) {
  const Params& p = sim.params();
  params_ = RouterParams::from(sim);
  const auto& info = sim.node(node);
  const auto ports = static_cast<std::uint32_t>(info.out.size());
  const std::uint32_t vcs = params_.vcs.vcs;
  routes_.build(sim, node);
  in_.resize(2 * ports);  // the ports, then the replication queues of the outputs
  out_.resize(ports);
  for (std::uint32_t port = 0; port < ports; ++port) {
    const PortLink& link = info.out[port];
    double in_bw = 0;
    if (link.connected) {
      const auto& back = sim.node(link.peer_node).out;
      in_bw = link.peer_port < back.size() && back[link.peer_port].connected ? back[link.peer_port].bw_gbps
                                                                              : link.bw_gbps;
    }
    in_[port].init(node, port, link, in_bw, vcs, params_.vcs.depth(link), params_.credit_ps);
    out_[port].init(sim, NodeComponent::name() + ".port" + std::to_string(port) + ".tx", link, vcs,
                    params_.vcs.depth(link), params_.flit_bytes, params_.stats_bin_ps);
  }
  for (std::uint32_t out = 0; out < ports; ++out)  // no upstream link: only the injection queue is used
    in_[replication_input(out)].init(node, replication_input(out), PortLink{}, 0, vcs, params_.vcs.depth(info.out[out]),
                                     params_.credit_ps);
  const auto inputs = static_cast<std::uint32_t>(in_.size());
  vca_.init(ports, vcs, params_.traffic_control, inputs);
  swa_.init(inputs, ports, vcs + 1);
  room_pending_.assign(ports, 0);
  queue_ps_.assign(ports, 0);
  for (std::uint32_t port = 0; port < ports; ++port)
    if (info.out[port].connected && params_.output_queue_flits)
      queue_ps_[port] = serialization_ps(static_cast<std::uint64_t>(params_.output_queue_flits) * params_.flit_bytes,
                                         info.out[port].bw_gbps);
  ready_pending_.assign(static_cast<std::size_t>(inputs) * (vcs + 1), 0);
  if (params_.flit_level) init_flit_level();
  for (std::uint32_t port = 0; port < ports; ++port) {
    if (!info.out[port].connected) continue;
    in_[port].allow_direct_credits();  // used where the upstream node takes them
    if (params_.flit_level) out_[port].channel().enable_direct_credits(sim, *this, kCreditWake, port);
  }
  for (std::uint32_t i = 0; i < params_.features.size(); ++i) {
    FeatureArgs a{&p, ports, i, node};
    features_.push_back(FeatureRegistry::instance().make(params_.features[i], a));
    features_.back()->register_stats(sim.stats(), NodeComponent::name() + "." + params_.features[i]);
  }
  const std::string n = NodeComponent::name();
  sim.stats().counter(n + ".packets_forwarded", "packets", &forwarded_);
  sim.stats().counter(n + ".packets_consumed_by_features", "packets", &consumed_);
  sim.stats().counter(n + ".packets_injected_by_features", "packets", &injected_);
  sim.stats().counter(n + ".packets_injected_at_outputs", "packets", &injected_at_outputs_);
  sim.stats().histogram(n + ".residence", "ns", &residence_ns_);
  watched_ = sim.watched(n);
}

NvSwitch::~NvSwitch() = default;

OutputChannel* NvSwitch::direct_credit_channel(std::uint32_t port) {
  if (!params_.flit_level || port >= num_ports() || !out_[port].connected()) return nullptr;
  return &out_[port].channel();
}

// ------------------------------------------------------------------ SwitchContext
TimePs NvSwitch::now() const { return sim_.now(); }
std::uint32_t NvSwitch::num_gpus() const { return sim_.num_gpus(); }
PacketHandle NvSwitch::new_packet() { return sim_.new_packet(*this); }
Packet& NvSwitch::packet(PacketHandle h) { return sim_.packets()[h]; }
void NvSwitch::release(PacketHandle h) { sim_.packets().release(h); }

std::uint32_t NvSwitch::port_toward(std::uint32_t dst) const {
  const auto& c = routes_.candidates(dst);
  return c.empty() ? kNoRoute : c.front();
}

void NvSwitch::inject(PacketHandle h, std::uint32_t in_port, TimePs delay_ps) {
  if (in_port >= num_ports()) throw InvariantError(NodeComponent::name() + ": inject on unknown port");
  Packet& p = sim_.packets()[h];
  if (p.flits == 0) p.flits = flits_for(p.payload_bytes, params_.flit_bytes, params_.header_flits);
  injected_ += p.lines;
  schedule(sim_.now() + delay_ps, kInject, h, in_port);
}

void NvSwitch::inject_at_output(PacketHandle h, TimePs delay_ps) {
  Packet& p = sim_.packets()[h];
  if (p.flits == 0) p.flits = flits_for(p.payload_bytes, params_.flit_bytes, params_.header_flits);
  const std::uint32_t out = routes_.route(p);  // deterministic: make_entry routes it the same way
  if (out == kNoRoute) {
    std::ostringstream os;
    os << NodeComponent::name() << ": no route to node " << p.dst << " for " << proto::PacketType_Name(p.type)
       << " injected at an output";
    throw InvariantError(os.str());
  }
  injected_ += p.lines;
  injected_at_outputs_ += p.lines;
  schedule(sim_.now() + delay_ps, kInject, h, replication_input(out));
}

std::uint32_t NvSwitch::injection_queue(std::uint32_t in, PacketType type) const {
  if (!is_replication_input(in)) return in_[in].injection_vc();
  // One queue per VC class (its first VC's slot): the switch allocator round-robins among them.
  const VcClass c = vc_class_of(type, params_.traffic_control);
  if (c == VcClass::kAny) return in_[in].injection_vc();
  const VcRange r = vca_.range_of(type);
  // Traffic control (spec 3.6 (3): control apart from data): the merge unit's and group
  // sync's control packets queue in a FIFO of their own beside the responses', so a THROTTLE
  // or a release never waits behind the answers queued for that output (about 3 us when the
  // link is saturated: the throttles came too late to hold a GPU that ran ahead).
  if (params_.traffic_control && is_control_packet(type) && r.count > 1) return r.first + 1;
  return r.first;
}

std::string NvSwitch::input_name(std::uint32_t in) const {
  if (is_replication_input(in)) return "replication queue of port" + std::to_string(in - num_ports());
  return "port" + std::to_string(in);
}

void NvSwitch::schedule_timer(TimePs t, std::uint32_t feature_index, std::uint64_t arg) {
  schedule(std::max(t, sim_.now()), kFeatureTimer, arg, feature_index);
}

// ------------------------------------------------------------------ events
void NvSwitch::handle(const Event& e) {
  switch (e.kind) {
    case kPacketArrival:
      return on_arrival(static_cast<PacketHandle>(e.arg));
    case kHeadReady:
      ready_pending_[e.arg32 * (params_.vcs.vcs + 1) + e.arg] = 0;
      return head_changed(e.arg32, static_cast<std::uint32_t>(e.arg));
    case kAllocate:
      allocate_pending_ = false;
      return allocate();
    case kPortFree:
      try_select(e.arg32);
      if (swa_.has_requests(static_cast<std::uint32_t>(e.arg))) request_allocation(static_cast<std::uint32_t>(e.arg));
      return;
    case kInject: {
      const auto h = static_cast<PacketHandle>(e.arg);
      const std::uint32_t port = e.arg32;
      const std::uint32_t ivc = injection_queue(port, sim_.packets()[h].type);
      const bool was_empty = in_[port].empty(ivc);
      InputEntry entry = make_entry(h, port, sim_.now());
      entry.ready_ps = sim_.now() + params_.pipeline_ps();
      if (is_replication_input(port) && entry.out_port != port - num_ports())
        throw InvariantError(NodeComponent::name() + ": a packet in the " + input_name(port) + " routes elsewhere");
      in_[port].inject(entry, ivc);
      if (was_empty) head_changed(port, ivc);
      return;
    }
    case kFeatureTimer:
      features_.at(e.arg32)->on_timer(*this, e.arg);
      return;
    case kFlitTick:
      if (e.arg == tick_at_) flit_tick();  // otherwise superseded by an earlier tick
      return;
    case kCreditWake:  // the credit's counters land on the next read
      return wake_vc_waiters(e.arg32);
    case kOutputRoom:
      room_pending_[e.arg32] = 0;
      if (swa_.has_requests(e.arg32)) request_allocation(e.arg32);
      return;
    default:
      throw InvariantError(NodeComponent::name() + ": unknown event kind " + std::to_string(e.kind));
  }
}

InputEntry NvSwitch::make_entry(PacketHandle h, std::uint32_t in_port, TimePs head_ps) {
  const Packet& p = sim_.packets()[h];
  const std::uint32_t out = routes_.route(p);
  if (out == kNoRoute) {
    std::ostringstream os;
    os << NodeComponent::name() << ": no route to node " << p.dst << " for " << proto::PacketType_Name(p.type)
       << " from node " << p.src << " (arrived on " << input_name(in_port) << ")";
    throw InvariantError(os.str());
  }
  InputEntry e;
  e.h = h;
  e.out_port = out;
  e.flits = p.flits;
  e.credit_flits = 0;  // injected packets hold no upstream credits
  e.tail_ps = sim_.now();
  e.ready_ps = head_ps + params_.pipeline_ps();
  e.known_ps = sim_.now();
  return e;
}

void NvSwitch::on_arrival(PacketHandle h) {
  Packet& p = sim_.packets()[h];
  const std::uint32_t port = p.hop_port;
  if (p.type == proto::PKT_CREDIT) return on_credit(port, h);
  if (port >= num_ports()) throw InvariantError(NodeComponent::name() + ": packet on unknown port");
  const std::uint32_t vc = p.vc, flits = p.flits, lines = p.lines;
  in_[port].check_fits(p);
  if (watched_) {
    std::ostringstream os;
    os << "arrive port" << port << " vc" << vc << " " << proto::PacketType_Name(p.type) << " id " << p.id << " "
       << p.src << "->" << p.dst << " addr 0x" << std::hex << p.addr;
    sim_.trace(*this, os.str());
  }
  // Features first (NVLS, merge unit, sync): a consumed packet leaves the VC buffer at once.
  for (auto& f : features_) {
    if (f->on_arrival(*this, port, h) == SwitchFeature::Verdict::kConsumed) {
      consumed_ += lines;
      in_[port].return_credits(sim_, *this, vc, flits, sim_.now());
      return;
    }
  }
  // Cut-through: the head arrived one serialisation time before the tail (announced now).
  // A feature may have rewritten the packet; buffer space and credits follow what arrived.
  // A packet announced at its head (a flit-level sender) has its first flit in now.
  const bool at_head = p.tail_ps > sim_.now();
  const TimePs flit_ps = serialization_ps(params_.flit_bytes, in_[port].in_bw_gbps());
  const TimePs ser = at_head ? flit_ps : serialization_ps(static_cast<std::uint64_t>(flits) * params_.flit_bytes,
                                                          in_[port].in_bw_gbps());
  const TimePs head = sim_.now() > ser ? sim_.now() - ser : 0;
  InputEntry entry = make_entry(h, port, head);
  entry.credit_flits = flits;
  if (at_head) {
    if (!params_.flit_level)
      throw InvariantError(NodeComponent::name() + ": a packet announced at its head needs net.sw_alloc_granularity=flit");
    entry.tail_ps = p.tail_ps;
    entry.flit_step_ps = flit_ps;
  }
  const bool was_empty = in_[port].empty(vc);
  in_[port].accept(vc, entry);
  ++buffered_;
  if (was_empty) head_changed(port, vc);
}

void NvSwitch::on_credit(std::uint32_t port, PacketHandle h) {
  const Packet& c = sim_.packets()[h];
  out_[port].channel().return_credits(c.vc, c.count);
  sim_.packets().release(h);
  wake_vc_waiters(port);
}

void NvSwitch::head_changed(std::uint32_t in, std::uint32_t vc) {
  if (params_.flit_level) return flit_head_changed(in, vc);
  InputUnit& iu = in_[in];
  if (iu.empty(vc)) return;
  InputEntry& e = iu.head(vc);
  if (e.ready_ps > sim_.now()) {
    std::uint8_t& pending = ready_pending_[in * (params_.vcs.vcs + 1) + vc];
    if (!pending) {
      pending = 1;
      schedule(e.ready_ps, kHeadReady, vc, in);
    }
    return;
  }
  if (e.out_vc < 0) {
    const std::int32_t v = vca_.allocate(e.out_port, out_[e.out_port].channel(), sim_.packets()[e.h].type, e.flits);
    if (v < 0) {
      wait_for_vc(e.out_port, in, vc);
      return;
    }
    e.out_vc = v;
  }
  swa_.set_ready(in, vc, true);
  try_select(in);
}

void NvSwitch::try_select(std::uint32_t in) {
  const std::int32_t vc = swa_.select(in, sim_.now());
  if (vc < 0) return;
  swa_.request(in, static_cast<std::uint32_t>(vc), in_[in].head(static_cast<std::uint32_t>(vc)).out_port);
  if (!allocate_pending_) {
    allocate_pending_ = true;
    schedule(sim_.now(), kAllocate);
  }
}

void NvSwitch::request_allocation(std::uint32_t out) {
  swa_.mark_dirty(out);
  if (!allocate_pending_) {
    allocate_pending_ = true;
    schedule(sim_.now(), kAllocate);
  }
}

// One pass of stage 2 over the outputs with new requests. Intra-step order: every request
// filed at this time step is in before any output arbitrates (kAllocate runs after them).
void NvSwitch::allocate() {
  auto& dirty = swa_.dirty();
  for (std::size_t i = 0; i < dirty.size(); ++i) {
    const std::uint32_t out = dirty[i];
    swa_.clear_dirty(out);
    if (!output_has_room(out)) {  // its kPortFree (or kOutputRoom) re-arbitrates
      wake_when_room(out);
      continue;
    }
    const std::int32_t in = swa_.grant(out);
    if (in < 0) continue;
    send(static_cast<std::uint32_t>(in), out);
    swa_.lost(out, params_.sw_alloc_patience, losers_);
    for (std::uint32_t l : losers_) try_select(l);
  }
  dirty.clear();
}

bool NvSwitch::output_has_room(std::uint32_t out) const {
  const TimePs free = out_[out].channel().free_at(), now = sim_.now();
  return free <= now || free - now <= queue_ps_[out];
}

void NvSwitch::wake_when_room(std::uint32_t out) {
  if (queue_ps_[out] == 0 || room_pending_[out]) return;  // without a queue the sender's kPortFree wakes it
  room_pending_[out] = 1;
  schedule(out_[out].channel().free_at() - queue_ps_[out], kOutputRoom, 0, out);
}

void NvSwitch::send(std::uint32_t in, std::uint32_t out) {
  const auto vc = static_cast<std::uint32_t>(swa_.selected(in));
  const TimePs now = sim_.now();
  const InputEntry e = in_[in].pop(sim_, *this, vc, now);
  // Unblocked packets start as if allocated when their head was ready (cut-through); a packet
  // that had to wait starts now, back to back with the transfer that freed its port.
  TimePs earliest = e.ready_ps + params_.xbar_ps;
  if (now > e.tail_ps) earliest = std::max(earliest, now);
  earliest = std::max(earliest, swa_.input_busy_until(in));
  const std::uint32_t lines = sim_.packets()[e.h].lines;
  const TimePs tail = out_[out].send(sim_, *this, e.h, static_cast<std::uint32_t>(e.out_vc), earliest, e.tail_ps);
  vca_.release(out, static_cast<std::uint32_t>(e.out_vc));
  // With an output queue the input is free once the packet has crossed at its own rate.
  TimePs in_free = tail;
  if (queue_ps_[out] && in_[in].in_bw_gbps() > 0)
    in_free = std::max({now, e.tail_ps,
                        earliest + serialization_ps(static_cast<std::uint64_t>(e.flits) * params_.flit_bytes,
                                                    in_[in].in_bw_gbps())});
  in_free = std::min(in_free, tail);
  swa_.commit(in, out, in_free);
  schedule(in_free, kPortFree, out, in);
  forwarded_ += lines;
  if (watched_) {
    const Packet& p = sim_.packets()[e.h];
    std::ostringstream os;
    os << "send " << proto::PacketType_Name(p.type) << " id " << p.id << " " << input_name(in) << " vc" << vc << " -> port"
       << out << " vc" << e.out_vc << ", tail leaves at " << tail << " ps";
    sim_.trace(*this, os.str());
  }
  residence_ns_.add(static_cast<double>(tail - e.tail_ps) / 1000.0);
  // Older waiters get the released downstream VC before this VC's next head asks for it.
  wake_vc_waiters(out);
  head_changed(in, vc);
}

// A credit or a VC release at `out` wakes them (direct credits: arm the next return).
void NvSwitch::wait_for_vc(std::uint32_t out, std::uint32_t in, std::uint32_t vc) {
  vca_.wait(out, in, vc);
  out_[out].channel().want_wake(0);
}

void NvSwitch::wake_vc_waiters(std::uint32_t out) {
  if (!vca_.has_waiters(out)) return;
  std::vector<std::pair<std::uint32_t, std::uint32_t>> waiters;
  vca_.take_waiters(out, waiters);
  out_[out].channel().no_wake();  // until one of them waits again
  for (const auto& w : waiters) head_changed(w.first, w.second);
}

// ------------------------------------------------------------------ end of run
bool NvSwitch::done() const {
  for (const auto& iu : in_)
    if (iu.packets_buffered() != 0) return false;
  for (const auto& f : features_)
    if (!f->idle()) return false;
  return true;
}

std::string NvSwitch::blocked_reason() const {
  if (done()) return {};
  std::ostringstream os;
  for (std::uint32_t in = 0; in < in_.size(); ++in)
    for (std::uint32_t vc = 0; vc <= in_[in].num_vcs(); ++vc) {
      const EntryRing& q = in_[in].queue(vc);
      if (q.empty()) continue;
      const InputEntry& e = q.at(0);
      os << input_name(in);
      if (!is_replication_input(in)) os << (vc == in_[in].num_vcs() ? " injection queue" : " vc" + std::to_string(vc));
      os << ": "
         << q.size() << " packets, head to port" << e.out_port;
      if (e.out_vc < 0) {
        os << " waiting for a downstream VC (credits:";
        for (std::uint32_t v = 0; v < params_.vcs.vcs; ++v) os << ' ' << out_[e.out_port].channel().credits(v);
        os << ")";
      } else {
        os << " holding vc" << e.out_vc << ", waiting for the switch";
      }
      return os.str();
    }
  for (std::uint32_t i = 0; i < features_.size(); ++i)
    if (!features_[i]->idle()) return "feature " + params_.features[i] + " is not idle";
  return {};
}

void NvSwitch::check_drained() const {
  for (std::uint32_t in = 0; in < in_.size(); ++in)
    if (in_[in].packets_buffered() != 0)
      throw InvariantError(NodeComponent::name() + ": packets left in " + input_name(in) + " (" + blocked_reason() +
                           ")");
  for (std::uint32_t port = 0; port < out_.size(); ++port)
    if (out_[port].connected() && !out_[port].channel().all_credits_home())
      throw InvariantError(NodeComponent::name() + ": credits of output port " + std::to_string(port) +
                           " not returned at end of run");
  if (vca_.held_count() != 0) throw InvariantError(NodeComponent::name() + ": downstream VCs still held");
  for (const auto& f : features_) f->check_drained();
}

// ------------------------------------------------------------------ registration
namespace {
const bool registered = [] {
  NodeFactory f;
  f.engine = "net";
  f.param_prefixes = {"net."};
  f.setup = [](Sim& sim) {
    const Params& p = sim.params();
    for (const auto& k : harness_only_net_keys()) p.ignore_prefix(k);
    // Parameters of switch features that are not enabled are someone else's business.
    const RouterParams rp = RouterParams::from(sim);
    for (const auto& name : FeatureRegistry::instance().names()) {
      bool enabled = false;
      for (const auto& e : rp.features) enabled |= e == name;
      if (!enabled) p.ignore_prefix("net." + name + ".");
    }
  };
  f.build = [](Sim& sim, std::uint32_t node) -> std::unique_ptr<NodeComponent> {
    return std::make_unique<NvSwitch>(sim, node);
  };
  NodeRegistry::instance().add(proto::NODE_SWITCH, "nvswitch", std::move(f));
  return true;
}();
}  // namespace

}  // namespace cais::net
