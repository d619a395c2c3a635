#include "cais/sim.h"

#include <algorithm>
#include <iostream>
#include <sstream>

#include "cais/errors.h"
#include "cais/packet_records.h"

namespace cais {

Sim::Sim() { queue_.reserve(1 << 16); }

void Sim::configure(const proto::Configure& cfg) {
  cfg_ = cfg;
  params_ = Params(cfg.params());
  engine_index_ = cfg.engine_index();
  const auto& topo = cfg.topology();
  nodes_.assign(topo.nodes_size(), NodeInfo{});
  num_gpus_ = 0;
  for (const auto& n : topo.nodes()) {
    if (n.id() >= nodes_.size()) throw ConfigError("topology.nodes", "node ids must be 0..N-1");
    NodeInfo& info = nodes_[n.id()];
    info.id = n.id();
    info.kind = n.kind();
    info.name = n.name();
    // Node names go into every message and statistic about the node: printable text only.
    if (info.name.empty() || escaped(info.name) != info.name || info.name.find(' ') != std::string::npos)
      throw ConfigError("topology.nodes", "node " + std::to_string(n.id()) + " has the name " + quote(info.name) +
                                              "; allowed: printable characters without spaces");
    info.out.assign(n.num_ports(), PortLink{});
    if (n.kind() == proto::NODE_GPU) ++num_gpus_;
  }
  for (const auto& l : topo.links()) {
    if (l.src_node() >= nodes_.size() || l.dst_node() >= nodes_.size())
      throw ConfigError("topology.links", "link refers to an unknown node");
    auto& ports = nodes_[l.src_node()].out;
    if (l.src_port() >= ports.size()) throw ConfigError("topology.links", "link port out of range on " + nodes_[l.src_node()].name);
    // Bounded so that one packet's serialization (and the busy-time bins it fills) stays finite.
    if (!(l.bw_gbps() >= kMinLinkGbps && l.bw_gbps() <= kMaxLinkGbps)) {
      std::ostringstream os;
      os << "bandwidth must be " << kMinLinkGbps << " to " << kMaxLinkGbps << " GB/s on " << nodes_[l.src_node()].name
         << ", got " << l.bw_gbps();
      throw ConfigError("topology.links", os.str());
    }
    if (l.latency_ps() > kMaxLinkLatencyPs)
      throw ConfigError("topology.links", "latency must be <= " + std::to_string(kMaxLinkLatencyPs) + " ps on " +
                                              nodes_[l.src_node()].name + ", got " + std::to_string(l.latency_ps()));
    PortLink& pl = ports[l.src_port()];
    pl.connected = true;
    pl.peer_node = l.dst_node();
    pl.peer_port = l.dst_port();
    pl.bw_gbps = l.bw_gbps();
    pl.latency_ps = l.latency_ps();
    pl.lanes = l.lanes();
  }
  // Every link has its reverse (credits and responses travel back on it): a packet arriving on a
  // port indexes that port's buffers, so a dst_port past the node's ports wrote out of bounds.
  for (const auto& n : nodes_)
    for (std::uint32_t port = 0; port < n.out.size(); ++port) {
      const PortLink& l = n.out[port];
      if (!l.connected) continue;
      const auto& back = nodes_[l.peer_node].out;
      if (l.peer_port >= back.size() || !back[l.peer_port].connected || back[l.peer_port].peer_node != n.id ||
          back[l.peer_port].peer_port != port)
        throw ConfigError("topology.links", "the link from " + n.name + " port " + std::to_string(port) + " to " +
                                                nodes_[l.peer_node].name + " port " + std::to_string(l.peer_port) +
                                                " has no link back on that port");
    }
  node_engine_.assign(cfg.node_engine().begin(), cfg.node_engine().end());
  if (node_engine_.size() != nodes_.size()) throw ConfigError("node_engine", "must name an engine for every node");
  num_engines_ = 0;
  for (auto e : node_engine_) num_engines_ = std::max(num_engines_, e + 1);
  hosted_.assign(cfg.hosted_nodes().begin(), cfg.hosted_nodes().end());
  std::vector<bool> seen(nodes_.size(), false);
  for (const auto id : hosted_) {
    if (id >= nodes_.size())
      throw ConfigError("hosted_nodes", "node " + std::to_string(id) + " is not in the topology (it has " +
                                            std::to_string(nodes_.size()) + " nodes)");
    if (seen[id]) throw ConfigError("hosted_nodes", "node " + std::to_string(id) + " is listed twice");
    seen[id] = true;
  }
  local_nodes_.assign(nodes_.size(), nullptr);
  outbox_.assign(num_engines_, Outbound{});
  watch_.assign(cfg.watch().begin(), cfg.watch().end());
}

void Sim::check_not_past(const Event& e) const {
  if (e.time < now_) throw InvariantError("event scheduled in the past");
}

std::uint64_t Sim::run_until(TimePs until, std::uint64_t max_events) {
  std::uint64_t n = 0;
  while (n < max_events && !queue_.empty() && queue_.top().time < until) {
    const Event e = queue_.pop();
    passed_key_ = e.time > now_ ? e.key : std::max(passed_key_, e.key);
    now_ = e.time;
    cur_key_ = e.key;
    e.target->handle(e);
    ++n;
  }
  events_ += n;
  return n;
}

PacketHandle Sim::new_packet(Component& creator) {
  const PacketHandle h = pool_.alloc();
  pool_[h].id = creator.next_key();
  return h;
}

void Sim::send(PacketHandle h, TimePs arrival, Component& sender) {
  Packet& p = pool_[h];
  p.arrival_ps = arrival;
  p.hop_key = sender.next_key();
  const std::uint32_t dst = p.hop_dst;
  if (local_nodes_[dst] != nullptr) {
    queue_.push(Event{arrival, p.hop_key, local_nodes_[dst], kPacketArrival, 0, h});
    return;
  }
  const std::uint32_t engine = node_engine_[dst];
  if (engine == engine_index_) throw InvariantError("packet to node " + nodes_[dst].name + " which this process does not host");
  Outbound& out = outbox_[engine];
  append_record(p, out.records);
  ++out.packets;
  out.min_arrival = std::min(out.min_arrival, arrival);
  ++outbox_count_;
  pool_.release(h);
}

void Sim::deliver_inbound(std::string_view records, std::uint32_t count) {
  inbound_.clear();
  const char* data = records.data();
  std::size_t left = records.size();
  try {
    for (std::uint32_t i = 0; i < count; ++i) {
      if (left == 0)
        throw ProtocolError("packet batch: " + std::to_string(count) + " packets announced, " + std::to_string(i) +
                            " present");
      const PacketHandle h = pool_.take();  // read_record sets every field
      inbound_.push_back(h);
      const std::size_t used = read_record(data, left, pool_[h]);
      data += used;
      left -= used;
      check_inbound(pool_[h]);
    }
    if (left != 0) throw ProtocolError("packet batch: bytes left over after its " + std::to_string(count) + " packets");
  } catch (...) {
    for (const PacketHandle h : inbound_) pool_.release(h);
    inbound_.clear();
    throw;
  }
  for (const PacketHandle h : inbound_) {
    const Packet& p = pool_[h];
    queue_.push(Event{p.arrival_ps, p.hop_key, local_nodes_[p.hop_dst], kPacketArrival, 0, h});
  }
}

void Sim::check_inbound(const Packet& pkt) const {
  if (pkt.arrival_ps < window_start_) {
    std::ostringstream os;
    os << "causality violation: packet arrives at " << pkt.arrival_ps << " ps, before window start "
       << window_start_ << " ps (lookahead larger than a cross-process link latency?)";
    throw ProtocolError(os.str());
  }
  if (pkt.hop_dst >= local_nodes_.size() || local_nodes_[pkt.hop_dst] == nullptr)
    throw ProtocolError("inbound packet for node " + std::to_string(pkt.hop_dst) + " not hosted here");
  // Handlers index ports and switch on the type: a packet from another process must have come
  // over a link of this topology (what a bad or garbled batch would break first).
  const NodeInfo& at = nodes_[pkt.hop_dst];
  if (pkt.hop_port >= at.out.size() || !at.out[pkt.hop_port].connected)
    throw ProtocolError("inbound packet for port " + std::to_string(pkt.hop_port) + " of " + at.name +
                        ", which has no link there");
  if (pkt.type == proto::PKT_UNSPECIFIED || !proto::PacketType_IsValid(pkt.type))
    throw ProtocolError("inbound packet of unknown type " + std::to_string(pkt.type) + " for " + at.name);
}

void Sim::attach_node(std::uint32_t node_id, NodeComponent* c) { local_nodes_.at(node_id) = c; }

std::mt19937_64 Sim::make_rng(const std::string& stream) const {
  std::uint64_t h = 1469598103934665603ull;  // FNV-1a of the stream name, mixed with the seed
  for (unsigned char ch : stream) h = (h ^ ch) * 1099511628211ull;
  std::seed_seq seq{static_cast<std::uint32_t>(cfg_.seed()), static_cast<std::uint32_t>(cfg_.seed() >> 32),
                    static_cast<std::uint32_t>(h), static_cast<std::uint32_t>(h >> 32)};
  return std::mt19937_64(seq);
}

bool Sim::watched(const std::string& component) const {
  for (const auto& w : watch_)
    if (component.compare(0, w.size(), w) == 0) return true;
  return false;
}

void Sim::trace(const Component& c, const std::string& msg) const {
  std::cerr << now_ << " | " << c.name() << " | " << msg << "\n";
}

void Sim::clear_outbox() {
  for (auto& b : outbox_) {
    b.records.clear();  // keeps its capacity
    b.packets = 0;
    b.min_arrival = kNever;
  }
  outbox_count_ = 0;
}

}  // namespace cais
