#include "cais/gpu/nvlink_ports.h"

#include <algorithm>

#include "cais/errors.h"
#include "cais/gpu/remote_packetizer.h"
#include "cais/vc_classes.h"

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
  const VcLayout vcs = VcLayout::of(sim);
  num_vcs_ = vcs.vcs;
  // The switch's VC classes (cais/vc_classes.h): requests and responses apart; with traffic
  // control, loads, reductions/stores and responses apart.
  member_acks_ = p.has("net.nvls.member_acks") && p.get_bool("net.nvls.member_acks");
  const bool tc = p.get_bool("net.traffic_control");
  const VcSplit split = vc_split(num_vcs_, tc);  // without tc, load = reduction = the request range
  vcs_of_[kReq] = split.load;
  vcs_of_[kPost] = split.reduction;
  vcs_of_[kResp] = split.response;
  planes_ = init_endpoint_ports(sim, ctx_.node, ctx_.name(), vcs, flit_bytes_, out_, in_);
  // The largest packet: one line (bulk packets are sized to the VCs, bulk_keeps_credit_loop).
  vcs.require_fits(flits(ctx_.cfg.max_packet_bytes),
                   "a line of gpu.max_packet_bytes=" + std::to_string(ctx_.cfg.max_packet_bytes));
  for (std::uint32_t port = 0; port < out_.size(); ++port) {
    if (!out_[port].connected()) continue;
    out_[port].enable_direct_credits(sim, ctx_.self, kCreditWake, port);
    in_[port].allow_direct_credits();  // used where the switch takes them
  }
  queues_.resize(out_.size());
  post_reserved_.assign(out_.size(), 0);
  if (tc) {
    pools_ = {{{kReq, kResp}, {kPost, kPost}}};
    pool_size_ = {2, 1};
  } else {
    pools_ = {{{kResp, kResp}, {kPost, kReq}}};
    pool_size_ = {1, 2};
  }
  for (std::uint32_t pool = 0; pool < 2; ++pool)
    for (std::uint32_t j = 0; j < pool_size_[pool]; ++j) pool_of_[pools_[pool][j]] = static_cast<std::uint8_t>(pool);
  turn_.assign(out_.size(), {0, 0, 0});
  credit_loops_.clear();
  const TimePs credit_ps = ns_to_ps(p.get_double("net.credit_delay_ns"));
  for (const auto& o : out_)
    if (o.connected())
      credit_loops_.push_back({o.credits(0), o.link().bw_gbps / 1000.0, 2 * o.link().latency_ps + credit_ps});
  next_vc_.assign(out_.size(), {0, 0, 0});
  return true;
}

bool NvlinkPorts::bulk_keeps_credit_loop(std::uint32_t lines, std::uint32_t line_flits) const {
  const std::uint64_t bulk = static_cast<std::uint64_t>(lines) * line_flits;
  for (const CreditLoop& l : credit_loops_)
    for (const std::uint32_t cls : {kPost, kResp}) {
      const std::uint64_t vcs = vcs_of_[cls].count;
      const double held = static_cast<double>(vcs * (l.vc_flits / bulk * bulk) * flit_bytes_);
      const double single = static_cast<double>(vcs * (l.vc_flits / line_flits * line_flits) * flit_bytes_);
      const double loop = l.bytes_per_ps * static_cast<double>(l.round_trip_ps) + static_cast<double>(bulk * flit_bytes_);
      if (held < single && held < loop) return false;
    }
  return true;
}

void NvlinkPorts::enqueue(PacketHandle h, std::uint32_t port, std::uint32_t cls) {
  queues_[port][cls].push_back(h);
  pump(port);
}

bool NvlinkPorts::post_room(std::uint32_t port, std::uint32_t flits) const {
  const OutputChannel& ch = out_[port];
  const VcRange r = vcs_of_[kPost];
  std::uint64_t free = 0;
  for (std::uint32_t vc = r.first; vc < r.first + r.count; ++vc) free += ch.credits(vc);
  return post_reserved_[port] + flits <= free;
}

void NvlinkPorts::pump(std::uint32_t port) {
  Sim& sim = ctx_.sim;
  OutputChannel& ch = out_[port];
  if (!ch.idle_at(sim.now())) return rearm(port);  // a kPortFree event is pending
  // Pools and the classes within them take turns (nvlink_ports.h), so that no class's stream
  // (a store's lines, a load's requests, the answers to peers' loads) starves another.
  std::array<std::uint8_t, 3>& turn = turn_[port];
  std::array<std::uint32_t, 3> order{};
  std::uint32_t n = 0;
  for (std::uint32_t i = 0; i < 2; ++i) {
    const std::uint32_t pool = (turn[0] + i) % 2;
    for (std::uint32_t j = 0; j < pool_size_[pool]; ++j) order[n++] = pools_[pool][(turn[1 + pool] + j) % pool_size_[pool]];
  }
  for (std::uint32_t k = 0; k < n; ++k) {
    const std::uint32_t cls = order[k];
    auto& q = queues_[port][cls];
    if (q.empty()) continue;
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
    const PacketHandle h = q.front();
    q.pop_front();
    const Packet& p = sim.packets()[h];
    const auto type = p.type;
    const std::uint64_t tag = p.tag;
    tx_bytes_[type] += p.payload_bytes;
    tx_packets_[type] += p.lines;
    const std::uint32_t pool = pool_of_[cls];
    turn[0] = static_cast<std::uint8_t>(1 - pool);
    if (pool_size_[pool] == 2) turn[1 + pool] = pools_[pool][0] == cls ? 1 : 0;
    if ((tag & kPostedStoreTag) && cls == kPost) {
      if (post_reserved_[port] < p.flits) throw InvariantError(ctx_.name() + ": posted store flits not reserved");
      post_reserved_[port] -= p.flits;
    }
    const TimePs free_at = ch.transmit(sim, ctx_.self, h, vc);
    ctx_.schedule(free_at, kPortFree, 0, port);
    // Posted requests (red.cais) are complete once on the wire.
    if (type == proto::PKT_CAIS_RED && cls == kPost && (tag & kFlagTag) == 0)
      ctx_.remote->packet_done(static_cast<std::uint32_t>(tag & 0xffffffffu));
    return rearm(port);
  }
  rearm(port);
}

void NvlinkPorts::rearm(std::uint32_t port) {
  OutputChannel& ch = out_[port];
  if (!ch.direct_credits()) return;
  if (ctx_.remote->waits_for_post_room(port)) return ch.want_wake(0);
  const auto& q = queues_[port];
  if (q[kResp].empty() && q[kReq].empty() && q[kPost].empty()) return ch.no_wake();
  // Busy: a return before the port frees finds it busy; one at that time may find it idle.
  ch.want_wake(ch.idle_at(ctx_.sim.now()) ? 0 : ch.free_at());
}

void NvlinkPorts::on_credit(PacketHandle h) {
  Sim& sim = ctx_.sim;
  const Packet& p = sim.packets()[h];
  const std::uint32_t port = p.hop_port;
  out_[port].return_credits(p.vc, p.count);
  sim.packets().release(h);
  pump(port);
  ctx_.remote->resume_posted(port);  // SMs whose stores wait for this port's credits
}

OutputChannel* NvlinkPorts::direct_credit_channel(std::uint32_t port) {
  if (port >= out_.size() || !out_[port].connected()) return nullptr;
  return &out_[port];
}

void NvlinkPorts::on_credit_wake(std::uint32_t port) {
  pump(port);
  ctx_.remote->resume_posted(port);
  rearm(port);  // the posted stores resumed or still waiting decide, with the queues
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
  for (std::uint64_t f : post_reserved_)
    if (f) throw InvariantError(ctx_.name() + ": posted store flits reserved but never sent at end of run");
}

}  // namespace cais::gpu
