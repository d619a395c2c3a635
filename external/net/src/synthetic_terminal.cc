#include "cais/net/synthetic_terminal.h"

#include <algorithm>
#include <sstream>

#include "cais/engine_host.h"
#include "cais/errors.h"
#include "cais/params.h"
#include "cais/sim.h"

namespace cais::net {

SyntheticTerminal::SyntheticTerminal(Sim& sim, std::uint32_t node)
    : NodeComponent(sim, sim.node(node).name, node << 8), node_(node) {
  const Params& p = sim.params();
  const std::string pat = p.get_enum("synthetic.traffic", {"uniform", "randperm", "hotspot"});
  pattern_ = pat == "uniform" ? SyntheticPattern::kUniform
             : pat == "randperm" ? SyntheticPattern::kRandPerm
                                 : SyntheticPattern::kHotspot;
  const std::uint32_t gpus = sim.num_gpus();
  for (double h : p.get_double_list("synthetic.hotspot_nodes")) {
    if (h < 0 || h >= gpus || h != static_cast<double>(static_cast<std::uint32_t>(h)))
      throw ConfigError("synthetic.hotspot_nodes", "must list terminal ids in 0.." + std::to_string(gpus - 1));
    hotspots_.push_back(static_cast<std::uint32_t>(h));
  }
  if (pattern_ == SyntheticPattern::kHotspot && hotspots_.empty())
    throw ConfigError("synthetic.hotspot_nodes", "hotspot traffic needs at least one hotspot node");
  packet_flits_ = static_cast<std::uint32_t>(p.get_uint("synthetic.packet_flits"));
  rate_ = p.get_double("synthetic.injection_rate_packets_per_cycle");
  if (rate_ < 0 || rate_ > 1) throw ConfigError("synthetic.injection_rate_packets_per_cycle", "must be in [0, 1]");
  const std::uint64_t warmup = p.get_uint("synthetic.warmup_cycles");
  const std::uint64_t measure = p.get_uint("synthetic.measure_cycles");
  const std::uint64_t drain = p.get_uint("synthetic.max_drain_cycles");
  flit_bytes_ = static_cast<std::uint32_t>(p.get_uint("net.flit_bytes"));
  header_flits_ = static_cast<std::uint32_t>(p.get_uint("net.header_flits"));
  if (packet_flits_ < std::max<std::uint32_t>(1, header_flits_))
    throw ConfigError("synthetic.packet_flits", "must be >= net.header_flits and >= 1");
  const VcLayout vc_layout = VcLayout::of(sim);
  vcs_ = vc_layout.vcs;
  const std::uint32_t depth = vc_layout.flits;  // the shallowest port's VC
  if (packet_flits_ > depth) throw ConfigError("synthetic.packet_flits", "larger than net.vc_depth_flits");
  const TimePs credit_ps = p.get_time_ps("net.credit_delay_ns");
  // A flit-level router streams a packet while its tail still arrives: announce heads to it.
  announce_head_ = p.has("net.sw_alloc_granularity") &&
                   p.get_enum("net.sw_alloc_granularity", {"packet", "flit"}) == "flit";
  const auto& info = sim.node(node);
  std::vector<std::uint32_t> weights;
  out_.resize(info.out.size());
  in_.resize(info.out.size());
  queues_.resize(info.out.size());
  next_vc_.assign(info.out.size(), 0);
  free_pending_.assign(info.out.size(), 0);
  bool any = false;
  for (std::uint32_t port = 0; port < info.out.size(); ++port) {
    out_[port].init(info.out[port], vcs_, vc_layout.depth(info.out[port]), flit_bytes_, 1000000);
    in_[port].init(node, port, info.out[port], vcs_, vc_layout.depth(info.out[port]), credit_ps);
    weights.push_back(info.out[port].connected ? std::max<std::uint32_t>(1, info.out[port].lanes) : 0);
    if (info.out[port].connected) {
      out_[port].register_stats(sim.stats(), name() + ".port" + std::to_string(port) + ".tx");
      out_[port].enable_direct_credits(sim, *this, kCreditWake, port);
      in_[port].allow_direct_credits();
      if (!any) cycle_ps_ = serialization_ps(flit_bytes_, info.out[port].bw_gbps);
      any = true;
    }
  }
  if (!any) throw ConfigError("topology.links", name() + " has no connected port");
  planes_ = PlaneHash(weights, 128);
  measure_begin_ps_ = warmup * cycle_ps_;
  measure_end_ps_ = (warmup + measure) * cycle_ps_;
  stop_ps_ = (warmup + measure + drain) * cycle_ps_;
  rng_ = sim.make_rng("synthetic." + name());
  if (pattern_ == SyntheticPattern::kRandPerm) {  // one permutation shared by every terminal
    auto prng = sim.make_rng("synthetic.randperm");
    perm_.resize(gpus);
    for (std::uint32_t i = 0; i < gpus; ++i) perm_[i] = i;
    std::shuffle(perm_.begin(), perm_.end(), prng);
  }
  const std::string s = name() + ".synthetic";
  auto& st = sim.stats();
  st.counter(s + ".generated_packets", "packets", &c_.generated_packets);
  st.counter(s + ".sent_flits", "flits", &c_.sent_flits);
  st.counter(s + ".received_flits", "flits", &c_.received_flits);
  st.counter(s + ".accepted_flits", "flits", &c_.accepted_flits);
  st.counter(s + ".measured_sent", "packets", &c_.measured_sent);
  st.counter(s + ".measured_received", "packets", &c_.measured_received);
  st.value(s + ".latency_sum", "cycles", [this] { return c_.latency_sum_cycles; });
  st.histogram(s + ".packet_latency", "cycles", &latency_);
  if (rate_ > 0 && gpus > 0) {
    if (rate_ < 1) gap_ = std::geometric_distribution<std::uint64_t>(rate_);
    generating_ = true;
    // Cycle 0 may already create a packet (Bernoulli trial per cycle, first success).
    const std::uint64_t first = rate_ >= 1 ? 0 : gap_(rng_);
    schedule(first * cycle_ps_, kGenerate);
  }
}

void SyntheticTerminal::handle(const Event& e) {
  switch (e.kind) {
    case kPacketArrival: return on_arrival(static_cast<PacketHandle>(e.arg));
    case kGenerate: return generate();
    case kPortFree:
      free_pending_[e.arg32] = 0;
      return pump(e.arg32);
    case kCreditWake:  // a credit packet's arrival pumped (its counters land on the next read)
      return pump(e.arg32);
    default: throw InvariantError(name() + ": unknown event");
  }
}

std::uint32_t SyntheticTerminal::pick_destination() {
  const std::uint32_t gpus = sim_.num_gpus();
  switch (pattern_) {
    case SyntheticPattern::kUniform:  // like BookSim: every terminal, itself included
      return static_cast<std::uint32_t>(rng_() % gpus);
    case SyntheticPattern::kRandPerm:
      return perm_[node_];
    case SyntheticPattern::kHotspot:
      return hotspots_[rng_() % hotspots_.size()];
  }
  return 0;
}

void SyntheticTerminal::generate() {
  const TimePs now = sim_.now();
  if (stop_ || now >= stop_ps_) {
    generating_ = false;
    return;
  }
  const PacketHandle h = sim_.new_packet(*this);
  Packet& p = sim_.packets()[h];
  p.type = proto::PKT_SYNTH;
  p.src = node_;
  p.dst = pick_destination();
  p.addr = rng_() & ~static_cast<std::uint64_t>(127);
  p.payload_bytes = (packet_flits_ - header_flits_) * flit_bytes_;
  p.flits = packet_flits_;
  p.inject_ps = now;
  const bool measured = now >= measure_begin_ps_ && now < measure_end_ps_;
  p.tag = measured ? 1 : 0;
  ++c_.generated_packets;
  c_.generated_inject_ps_sum += static_cast<double>(now);
  if (measured) ++c_.measured_sent;
  const std::uint32_t port = planes_.plane(p.addr);
  queues_[port].push_back(h);
  pump(port);
  schedule_next_generation();
}

void SyntheticTerminal::schedule_next_generation() {
  const std::uint64_t gap = rate_ >= 1 ? 1 : 1 + gap_(rng_);
  schedule(sim_.now() + gap * cycle_ps_, kGenerate);
}

OutputChannel* SyntheticTerminal::direct_credit_channel(std::uint32_t port) {
  return port < out_.size() && out_[port].connected() ? &out_[port] : nullptr;
}

// Sends what it can; a credit arriving later matters only while packets queue and the link
// is (or will be) idle when it lands: only then does a deferred credit return need an event.
void SyntheticTerminal::pump(std::uint32_t port) {
  try_send(port);
  OutputChannel& ch = out_[port];
  if (queues_[port].empty()) ch.no_wake();
  else ch.want_wake(ch.free_at());
}

void SyntheticTerminal::try_send(std::uint32_t port) {
  OutputChannel& ch = out_[port];
  auto& q = queues_[port];
  if (q.empty()) return;
  if (!ch.idle_at(sim_.now())) {  // wake up when the link is free (one pending event at most)
    if (!free_pending_[port]) {
      free_pending_[port] = 1;
      schedule(ch.free_at(), kPortFree, 0, port);
    }
    return;
  }
  const std::uint32_t flits = sim_.packets()[q.front()].flits;
  for (std::uint32_t i = 0; i < vcs_; ++i) {
    const std::uint32_t vc = (next_vc_[port] + i) % vcs_;
    if (!ch.has_credits(vc, flits)) continue;
    next_vc_[port] = (vc + 1) % vcs_;
    const PacketHandle h = q.front();
    q.pop_front();
    c_.sent_flits += flits;
    const TimePs free_at = announce_head_ ? ch.transmit_announcing_head(sim_, *this, h, vc)
                                          : ch.transmit(sim_, *this, h, vc);
    if (!q.empty() && !free_pending_[port]) {  // otherwise the next packet's pump schedules it
      free_pending_[port] = 1;
      schedule(free_at, kPortFree, 0, port);
    }
    return;
  }
  // No VC has room: the next credit arrival pumps again.
}

void SyntheticTerminal::on_arrival(PacketHandle h) {
  Packet& p = sim_.packets()[h];
  const std::uint32_t port = p.hop_port;
  if (p.type == proto::PKT_CREDIT) {
    out_[port].return_credits(p.vc, p.count);
    sim_.packets().release(h);
    pump(port);
    return;
  }
  in_[port].sink(sim_, *this, h);  // the terminal sinks packets at line rate
  const Packet& q = sim_.packets()[h];
  if (q.type != proto::PKT_SYNTH || q.dst != node_)
    throw InvariantError(name() + ": misdelivered " + proto::PacketType_Name(q.type) + " for node " +
                         std::to_string(q.dst));
  const TimePs now = sim_.now();
  c_.received_flits += q.flits;
  ++c_.received_packets;
  c_.received_inject_ps_sum += static_cast<double>(q.inject_ps);
  ++c_.phase_received;
  c_.phase_latency_sum_cycles += static_cast<double>(now - q.inject_ps) / static_cast<double>(cycle_ps_);
  if (now >= measure_begin_ps_ && now < measure_end_ps_) c_.accepted_flits += q.flits;
  if (q.tag == 1) {
    const double lat = static_cast<double>(now - q.inject_ps) / static_cast<double>(cycle_ps_);
    ++c_.measured_received;
    c_.latency_sum_cycles += lat;
    latency_.add(lat);
  }
  sim_.packets().release(h);
}

bool SyntheticTerminal::done() const {
  if (generating_) return false;
  for (const auto& q : queues_)
    if (!q.empty()) return false;
  return true;
}

std::string SyntheticTerminal::blocked_reason() const {
  if (done()) return {};
  std::size_t queued = 0;
  for (const auto& q : queues_) queued += q.size();
  std::ostringstream os;
  os << queued << " packets in the source queue" << (generating_ ? ", still generating" : "");
  return os.str();
}

void SyntheticTerminal::check_drained() const {
  for (const auto& o : out_)
    if (o.connected() && !o.all_credits_home()) throw InvariantError(name() + ": credits not returned at end of run");
  for (const auto& q : queues_)
    if (!q.empty()) throw InvariantError(name() + ": packets left in the source queue");
}

namespace {
const bool registered = [] {
  NodeFactory f;
  f.engine = "gpu";
  f.param_prefixes = {"synthetic."};
  f.build = [](Sim& sim, std::uint32_t node) -> std::unique_ptr<NodeComponent> {
    return std::make_unique<SyntheticTerminal>(sim, node);
  };
  NodeRegistry::instance().add(proto::NODE_GPU, "synthetic", std::move(f));
  return true;
}();
}  // namespace

}  // namespace cais::net
