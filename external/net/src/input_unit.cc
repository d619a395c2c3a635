#include "cais/net/input_unit.h"

#include "cais/errors.h"

namespace cais::net {

void EntryRing::push(const InputEntry& e) {
  if (size_ == buf_.size()) {  // grow to the next power of two, preserving order
    std::vector<InputEntry> bigger(buf_.empty() ? 4 : buf_.size() * 2);
    for (std::size_t i = 0; i < size_; ++i) bigger[i] = buf_[(head_ + i) & (buf_.size() - 1)];
    buf_.swap(bigger);
    head_ = 0;
  }
  buf_[(head_ + size_) & (buf_.size() - 1)] = e;
  ++size_;
}

InputEntry EntryRing::pop() {
  const InputEntry e = buf_[head_];
  head_ = (head_ + 1) & (buf_.size() - 1);
  --size_;
  return e;
}

void InputUnit::init(std::uint32_t node, std::uint32_t port, const PortLink& reverse, double in_bw_gbps,
                     std::uint32_t num_vcs, std::uint32_t vc_depth_flits, TimePs credit_delay_ps) {
  node_ = node;
  port_ = port;
  reverse_ = reverse;
  in_bw_gbps_ = in_bw_gbps;
  num_vcs_ = num_vcs;
  depth_ = vc_depth_flits;
  credit_delay_ps_ = credit_delay_ps;
  vcs_.assign(num_vcs + 1, Vc{});
}

void InputUnit::check_fits(const Packet& p) const {
  if (p.vc >= num_vcs_)
    throw InvariantError("packet on unknown vc " + std::to_string(p.vc) + " at node " + std::to_string(node_) +
                         " port " + std::to_string(port_));
  if (vcs_[p.vc].flits + p.flits > depth_)
    throw InvariantError("input buffer overflow at node " + std::to_string(node_) + " port " +
                         std::to_string(port_) + " vc " + std::to_string(p.vc));
}

void InputUnit::accept(std::uint32_t vc, const InputEntry& e) {
  if (vc >= num_vcs_ || vcs_[vc].flits + e.credit_flits > depth_)
    throw InvariantError("input buffer overflow at node " + std::to_string(node_) + " port " + std::to_string(port_) +
                         " vc " + std::to_string(vc));
  Vc& v = vcs_[vc];
  v.flits += e.credit_flits;
  v.ring.push(e);
}

void InputUnit::inject(const InputEntry& e, std::uint32_t queue) {
  if (queue > num_vcs_ || (queue < num_vcs_ && connected()))
    throw InvariantError("injection into vc " + std::to_string(queue) + " of linked input port " +
                         std::to_string(port_) + " at node " + std::to_string(node_));
  vcs_[queue].ring.push(e);
}

InputEntry InputUnit::pop(Sim& sim, Component& self, std::uint32_t vc, TimePs at) {
  Vc& v = vcs_[vc];
  const InputEntry e = v.ring.pop();
  if (vc < num_vcs_ && connected()) {
    v.flits -= e.credit_flits;
    return_credits(sim, self, vc, e.credit_flits, at);
  }
  return e;
}

void InputUnit::return_credits(Sim& sim, Component& self, std::uint32_t vc, std::uint32_t flits, TimePs at) {
  if (OutputChannel* d = direct_allowed_ ? direct_.get(sim, reverse_, credit_delay_ps_) : nullptr) {
    self.next_key();  // the credit packet's id: later keys and packet ids as with credit packets
    d->defer_return(at + credit_delay_ps_ + reverse_.latency_ps, self.next_key(), vc, flits);
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
  sim.send(c, at + credit_delay_ps_ + reverse_.latency_ps, self);
}

std::uint64_t InputUnit::packets_buffered() const {
  std::uint64_t n = 0;
  for (const auto& v : vcs_) n += v.ring.size();
  return n;
}

}  // namespace cais::net
