#include "cais/gpu/nvlink_ports.h"

#include <algorithm>

#include "cais/errors.h"
#include "cais/gpu/remote_packetizer.h"

namespace cais::gpu {

NvlinkPorts::NvlinkPorts(GpuContext& ctx) : ctx_(ctx) {}

bool NvlinkPorts::init() {
  Sim& sim = ctx_.sim;
  const auto& info = sim.node(ctx_.node);
  bool connected = false;
  for (const auto& l : info.out) connected |= l.connected;
  if (!connected) return false;
  const Params& p = sim.params();
  flit_bytes_ = static_cast<std::uint32_t>(p.get_uint("net.flit_bytes"));
  header_flits_ = static_cast<std::uint32_t>(p.get_uint("net.header_flits"));
  num_vcs_ = static_cast<std::uint32_t>(p.get_uint("net.vcs_per_port"));
  const VcDepth depth = VcDepth::from_params(p);
  // Same VC classes as the switch (external/net vc_allocator): requests and responses apart;
  // with traffic control, loads, reductions/stores and responses apart.
  member_acks_ = p.has("net.nvls.member_acks") && p.get_bool("net.nvls.member_acks");
  const bool tc = p.get_bool("net.traffic_control");
  if (num_vcs_ < (tc ? 3u : 2u)) throw ConfigError("net.vcs_per_port", tc ? "needs >= 3 with traffic control" : "needs >= 2");
  if (tc) {  // loads | reductions (posted) | responses
    const std::uint32_t resp = std::max<std::uint32_t>(1, num_vcs_ / 4), rest = num_vcs_ - resp;
    const std::uint32_t load = rest - rest / 2;
    vcs_of_[kReq] = {0, load};
    vcs_of_[kPost] = {load, rest - load};
    vcs_of_[kResp] = {rest, resp};
  } else {  // requests (and posted writes) | responses
    vcs_of_[kReq] = vcs_of_[kPost] = {0, num_vcs_ / 2};
    vcs_of_[kResp] = {num_vcs_ / 2, num_vcs_ - num_vcs_ / 2};
  }
  planes_ = init_endpoint_ports(sim, ctx_.node, ctx_.name(), num_vcs_, depth, flit_bytes_, out_, in_);
  queues_.resize(out_.size());
  const std::size_t sources = ctx_.cfg.egress_round_robin ? ctx_.cfg.num_sms + 2 : 1;  // SMs, copy engine, hub
  for (auto& port : queues_)
    for (auto& q : port) q.by_source.resize(sources);
  min_vc_flits_ = ~0u;
  for (const auto& o : out_)
    if (o.connected()) min_vc_flits_ = std::min(min_vc_flits_, o.credits(0));
  next_vc_.assign(out_.size(), {0, 0, 0});
  return true;
}

std::uint32_t NvlinkPorts::source_index(std::uint32_t source) const {
  if (!ctx_.cfg.egress_round_robin) return 0;
  return source == kHubSource ? ctx_.cfg.num_sms + 1 : source;
}

void NvlinkPorts::enqueue(PacketHandle h, std::uint32_t port, std::uint32_t cls, std::uint32_t source) {
  ClassQueue& q = queues_[port][cls];
  const std::uint32_t s = source_index(source);
  if (q.by_source[s].empty()) q.ready.push_back(s);
  q.by_source[s].push_back(h);
  pump(port);
}

PacketHandle NvlinkPorts::pop(ClassQueue& q) {
  const std::uint32_t s = q.ready.front();
  q.ready.pop_front();
  auto& fifo = q.by_source[s];
  const PacketHandle h = fifo.front();
  fifo.pop_front();
  if (!fifo.empty()) q.ready.push_back(s);
  return h;
}

void NvlinkPorts::pump(std::uint32_t port) {
  Sim& sim = ctx_.sim;
  OutputChannel& ch = out_[port];
  if (!ch.idle_at(sim.now())) return;  // a kPortFree event is pending
  for (std::uint32_t cls : {kResp, kPost, kReq}) {
    ClassQueue& q = queues_[port][cls];
    if (q.ready.empty()) continue;
    const VcRange r = vcs_of_[cls];
    const std::uint32_t flits = sim.packets()[q.front()].flits;
    std::uint32_t& next = next_vc_[port][cls];
    std::uint32_t vc = ~0u;
    for (std::uint32_t i = 0; i < r.count && vc == ~0u; ++i)
      if (ch.has_credits(r.first + (next + i) % r.count, flits)) {
        vc = r.first + (next + i) % r.count;
        next = (next + i + 1) % r.count;
      }
    if (vc == ~0u) continue;  // a credit return pumps again
    const PacketHandle h = pop(q);
    const Packet& p = sim.packets()[h];
    const auto type = p.type;
    const std::uint64_t tag = p.tag;
    tx_bytes_[type] += p.payload_bytes;
    tx_packets_[type] += p.lines;
    const TimePs free_at = ch.transmit(sim, ctx_.self, h, vc);
    ctx_.schedule(free_at, kPortFree, 0, port);
    // Posted requests (red.cais) are complete once on the wire.
    if (type == proto::PKT_CAIS_RED && cls == kPost && (tag & kFlagTag) == 0)
      ctx_.remote->packet_done(static_cast<std::uint32_t>(tag & 0xffffffffu));
    return;
  }
}

void NvlinkPorts::on_credit(PacketHandle h) {
  Sim& sim = ctx_.sim;
  const Packet& p = sim.packets()[h];
  const std::uint32_t port = p.hop_port;
  out_[port].return_credits(p.vc, p.count);
  sim.packets().release(h);
  pump(port);
}

void NvlinkPorts::receive(PacketHandle h) {
  Sim& sim = ctx_.sim;
  const Packet& p = sim.packets()[h];
  const std::uint32_t port = p.hop_port;
  in_[port].accept(sim, h);
  in_[port].pop(sim, ctx_.self, sim.packets()[h].vc);  // the hub sinks packets at line rate
  const Packet& q = sim.packets()[h];
  rx_bytes_[q.type] += q.payload_bytes;
  rx_packets_[q.type] += q.lines;
}

void NvlinkPorts::check_drained() const {
  for (const auto& o : out_)
    if (o.connected() && !o.all_credits_home()) throw InvariantError(ctx_.name() + ": credits not returned at end of run");
}

}  // namespace cais::gpu
