#include "cais/link.h"

#include "cais/errors.h"

namespace cais {

void HandleRing::push(PacketHandle h) {
  if (full()) throw InvariantError("ring overflow");
  buf_[(head_ + size_) % buf_.size()] = h;
  ++size_;
}

PacketHandle HandleRing::pop() {
  const PacketHandle h = buf_[head_];
  head_ = (head_ + 1) % buf_.size();
  --size_;
  return h;
}

void OutputChannel::init(const PortLink& link, std::uint32_t num_vcs, std::uint32_t vc_depth_flits,
                         std::uint32_t flit_bytes, TimePs series_bin_ps) {
  link_ = link;
  credits_.assign(num_vcs, vc_depth_flits);
  depth_ = vc_depth_flits;
  flit_bytes_ = flit_bytes;
  busy_until_ = 0;
  stats_ = ChannelStats{};
  stats_.wire_bytes_series = TimeSeries{series_bin_ps};
}

TimePs OutputChannel::transmit(Sim& sim, Component& sender, PacketHandle h, std::uint32_t vc) {
  return transmit(sim, sender, h, vc, sim.now(), 0);
}

// What every way of sending a packet does: take its credits, count it, address it to the peer.
TimePs OutputChannel::take(Sim& sim, Component& sender, PacketHandle h, std::uint32_t vc, TimePs start) {
  Packet& p = sim.packets()[h];
  settle();
  if (credits_[vc] < p.flits)
    throw InvariantError(sender.name() + ": transmit without credits on vc " + std::to_string(vc));
  credits_[vc] -= p.flits;
  const std::uint64_t bytes = static_cast<std::uint64_t>(p.flits) * flit_bytes_;
  const TimePs ser = serialization_ps(bytes, link_.bw_gbps);
  stats_.packets += p.lines;  // a bulk packet stands for its lines
  stats_.flits += p.flits;
  stats_.wire_bytes += bytes;
  stats_.payload_bytes += p.payload_bytes;
  stats_.busy_ps += ser;
  stats_.wire_bytes_series.add(start, static_cast<double>(bytes));
  p.hop_dst = link_.peer_node;
  p.hop_port = link_.peer_port;
  p.vc = vc;
  p.tail_ps = 0;
  return ser;
}

TimePs OutputChannel::transmit(Sim& sim, Component& sender, PacketHandle h, std::uint32_t vc,
                               TimePs earliest_start, TimePs min_tail) {
  const TimePs start = std::max(earliest_start, busy_until_);
  const TimePs ser = take(sim, sender, h, vc, start);
  busy_until_ = std::max(start + ser, std::max(min_tail, sim.now()));
  // Virtual cut-through: the packet is usable at the receiver once its tail has arrived.
  sim.send(h, busy_until_ + link_.latency_ps, sender);
  return busy_until_;
}

TimePs OutputChannel::transmit_announcing_head(Sim& sim, Component& sender, PacketHandle h, std::uint32_t vc) {
  const TimePs start = std::max(sim.now(), busy_until_);
  busy_until_ = start + take(sim, sender, h, vc, start);
  sim.packets()[h].tail_ps = busy_until_ + link_.latency_ps;
  sim.send(h, start + serialization_ps(flit_bytes_, link_.bw_gbps) + link_.latency_ps, sender);
  return busy_until_;
}

void OutputChannel::deliver_tail(Sim& sim, Component& sender, PacketHandle h, std::uint32_t vc, TimePs tail_ps) {
  const Packet& p = sim.packets()[h];
  const TimePs ser = serialization_ps(static_cast<std::uint64_t>(p.flits) * flit_bytes_, link_.bw_gbps);
  take(sim, sender, h, vc, tail_ps > ser ? tail_ps - ser : 0);
  busy_until_ = std::max(busy_until_, tail_ps);
  sim.send(h, std::max(tail_ps, sim.now()) + link_.latency_ps, sender);
}

void OutputChannel::return_credits(std::uint32_t vc, std::uint32_t flits) {
  if (vc >= credits_.size())  // a credit packet from another process names the VC
    throw ProtocolError("credit for VC " + std::to_string(vc) + " of a channel with " + std::to_string(credits_.size()) + " VCs");
  credits_[vc] += flits;
  ++credit_epoch_;
  if (credits_[vc] > depth_) throw InvariantError("credit counter above buffer depth");
}

void OutputChannel::enable_direct_credits(Sim& sim, Component& owner, std::uint32_t wake_kind, std::uint32_t port) {
  sim_ = &sim;
  owner_ = &owner;
  wake_kind_ = wake_kind;
  wake_port_ = port;
}

void OutputChannel::settle_due() const {
  const TimePs now = sim_->now();
  const std::uint64_t key = sim_->passed_key();
  // Due: at or before where the simulation stands (an armed return's own event included). Not
  // the event being handled: one scheduled for now runs after the queued events of now, the
  // credit packet's arrival among them, whatever its key.
  while (!deferred_.empty() && !before(now, key, deferred_.front().at, deferred_.front().key)) {
    const DeferredCredit& c = deferred_.front();
    credits_[c.vc] += c.flits;
    if (credits_[c.vc] > depth_) throw InvariantError("credit counter above buffer depth");
    deferred_.pop_front();
  }
}

void OutputChannel::defer_return(TimePs at, std::uint64_t key, std::uint32_t vc, std::uint32_t flits) {
  if (owner_ == nullptr) throw InvariantError("deferred credit return on a channel without direct credits");
  if (vc >= credits_.size())
    throw InvariantError("credit for VC " + std::to_string(vc) + " of a channel with " + std::to_string(credits_.size()) + " VCs");
  if (at <= sim_->now()) throw InvariantError("deferred credit return due at once (no credit or link delay)");
  deferred_.push(DeferredCredit{at, key, vc, flits, false});
  ++credit_epoch_;
  if (wants_wake_) arm_next();
}

void OutputChannel::want_wake(TimePs min_at) {
  if (owner_ == nullptr) return;  // credit packets wake the owner anyway
  wants_wake_ = true;
  wake_from_ = min_at;
  settle();  // what is left lies ahead of the event being handled
  arm_next();
}

// Arms the first pending return at or after wake_from_ unless it already is (its event will
// ask again); one armed return at a time is enough.
void OutputChannel::arm_next() {
  const std::size_t i = deferred_.first_from(wake_from_);
  if (i == deferred_.size()) return;
  DeferredCredit& c = deferred_.at(i);
  if (c.armed) return;
  c.armed = true;
  sim_->push(Event{c.at, c.key, owner_, wake_kind_, wake_port_, 0});
}

bool OutputChannel::all_credits_home() const {
  // At the end of a run every deferred return has arrived (its credit packet would have).
  for (std::size_t i = 0; i < deferred_.size(); ++i) credits_[deferred_.at(i).vc] += deferred_.at(i).flits;
  while (!deferred_.empty()) deferred_.pop_front();
  for (auto c : credits_)
    if (c != depth_) return false;
  return true;
}

void OutputChannel::register_stats(StatsRegistry& reg, const std::string& prefix) const {
  reg.counter(prefix + ".packets", "packets", &stats_.packets);
  reg.counter(prefix + ".flits", "flits", &stats_.flits);
  reg.counter(prefix + ".payload_bytes", "B", &stats_.payload_bytes);
  reg.counter(prefix + ".busy_ps", "ps", &stats_.busy_ps);
  reg.series(prefix + ".wire_bytes", "B", &stats_.wire_bytes_series);
}

void InputBuffer::init(std::uint32_t node, std::uint32_t port, const PortLink& reverse, std::uint32_t num_vcs,
                       std::uint32_t vc_depth_flits, TimePs credit_delay_ps) {
  node_ = node;
  port_ = port;
  reverse_ = reverse;
  depth_ = vc_depth_flits;
  credit_delay_ps_ = credit_delay_ps;
  vcs_.assign(num_vcs, Vc{});
  // A VC can never hold more packets than flits.
  for (auto& v : vcs_) v.ring.init(vc_depth_flits);
}

void InputBuffer::check_room(const Packet& p) const {
  if (p.vc >= vcs_.size()) throw InvariantError("packet on unknown vc " + std::to_string(p.vc));
  if (vcs_[p.vc].flits + p.flits > depth_)
    throw InvariantError("input buffer overflow at node " + std::to_string(node_) + " port " + std::to_string(port_));
}

void InputBuffer::accept(Sim& sim, PacketHandle h) {
  const Packet& p = sim.packets()[h];
  check_room(p);
  Vc& v = vcs_[p.vc];
  v.flits += p.flits;
  v.ring.push(h);
}

PacketHandle InputBuffer::pop(Sim& sim, Component& self, std::uint32_t vc) {
  Vc& v = vcs_[vc];
  const PacketHandle h = v.ring.pop();
  const std::uint32_t flits = sim.packets()[h].flits;
  v.flits -= flits;
  return_credits(sim, self, vc, flits);
  return h;
}

void InputBuffer::sink(Sim& sim, Component& self, PacketHandle h) {
  const Packet& p = sim.packets()[h];
  check_room(p);
  return_credits(sim, self, p.vc, p.flits);
}

void InputBuffer::return_credits(Sim& sim, Component& self, std::uint32_t vc, std::uint32_t flits) {
  if (OutputChannel* d = direct_allowed_ ? direct_.get(sim, reverse_, credit_delay_ps_) : nullptr) {
    self.next_key();  // the credit packet's id: later keys and packet ids as with credit packets
    d->defer_return(sim.now() + credit_delay_ps_ + reverse_.latency_ps, self.next_key(), vc, flits);
    return;
  }
  const PacketHandle c = sim.new_packet(self);
  Packet& cp = sim.packets()[c];
  cp.type = proto::PKT_CREDIT;
  cp.src = node_;
  cp.dst = reverse_.peer_node;
  cp.hop_dst = reverse_.peer_node;
  cp.hop_port = reverse_.peer_port;
  cp.vc = vc;
  cp.count = flits;
  sim.send(c, sim.now() + credit_delay_ps_ + reverse_.latency_ps, self);
}

OutputChannel* DirectCreditPeer::get(Sim& sim, const PortLink& reverse, TimePs credit_delay_ps) {
  if (resolved_) return ch_;
  resolved_ = true;
  if (sim.credit_packets_only()) return ch_;
  // Deferred returns must lie ahead of the event that files them (a credit packet's arrival does).
  if (!reverse.connected || credit_delay_ps + reverse.latency_ps == 0) return ch_;
  NodeComponent* peer = sim.local_node(reverse.peer_node);
  if (peer != nullptr) ch_ = peer->direct_credit_channel(reverse.peer_port);
  return ch_;
}

std::uint64_t InputBuffer::total_packets() const {
  std::uint64_t n = 0;
  for (const auto& v : vcs_) n += v.ring.size();
  return n;
}

void VcLayout::require_fits(std::uint32_t packet_flits, const std::string& what) const {
  if (packet_flits <= flits) return;
  const std::string n = std::to_string(packet_flits);
  throw ConfigError("net.vc_depth_flits", "is " + std::to_string(flits) + " flits but " + what + " is " + n +
                                              " flits and must fit one VC; allowed: >= " + n);
}

VcLayout VcLayout::of(const Sim& sim) {
  const Params& p = sim.params();
  VcLayout v;
  const std::uint64_t per = p.get_uint("net.vcs_per_port");
  v.flits = static_cast<std::uint32_t>(p.get_uint("net.vc_depth_flits"));
  if (v.flits == 0) throw ConfigError("net.vc_depth_flits", "must be >= 1");
  v.per_lane = p.has("net.vc_buffer_scope") && p.get_enum("net.vc_buffer_scope", {"lane", "port"}) == "lane";
  if (v.per_lane) {
    std::uint32_t narrowest = 0;
    for (std::size_t n = 0; n < sim.num_nodes(); ++n)
      for (const PortLink& l : sim.node(static_cast<std::uint32_t>(n)).out)
        if (l.connected) {
          const std::uint32_t lanes = std::max<std::uint32_t>(1, l.lanes);
          narrowest = narrowest ? std::min(narrowest, lanes) : lanes;
        }
    v.unit_lanes = std::max<std::uint32_t>(1, narrowest);
  }
  const std::uint64_t vcs = per * v.unit_lanes;
  if (per == 0 || vcs > kMaxVcs)
    throw ConfigError("net.vcs_per_port",
                      std::to_string(per) + (v.per_lane ? " per lane x " + std::to_string(v.unit_lanes) +
                                                              " lanes of the narrowest link"
                                                        : " per port") +
                          " gives " + std::to_string(vcs) + " VCs per port; allowed 1.." + std::to_string(kMaxVcs));
  v.vcs = static_cast<std::uint32_t>(vcs);
  return v;
}

PlaneHash init_endpoint_ports(Sim& sim, std::uint32_t node, const std::string& name, const VcLayout& vcs,
                              std::uint32_t flit_bytes, std::vector<OutputChannel>& out,
                              std::vector<InputBuffer>& in) {
  if (flit_bytes == 0) throw ConfigError("net.flit_bytes", "must be >= 1");  // flits_for divides by it
  const auto& info = sim.node(node);
  std::vector<std::uint32_t> weights;
  out.resize(info.out.size());
  in.resize(info.out.size());
  for (std::uint32_t port = 0; port < info.out.size(); ++port) {
    const PortLink& link = info.out[port];
    out[port].init(link, vcs.vcs, vcs.depth(link), flit_bytes, 1000000);
    in[port].init(node, port, link, vcs.vcs, vcs.depth(link), 0);
    weights.push_back(link.connected ? std::max<std::uint32_t>(1, link.lanes) : 0);
    if (link.connected) out[port].register_stats(sim.stats(), name + ".port" + std::to_string(port) + ".tx");
  }
  return PlaneHash(weights, 128);
}

}  // namespace cais
