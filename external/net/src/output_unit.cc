#include "cais/net/output_unit.h"

namespace cais::net {

void OutputUnit::init(Sim& sim, const std::string& prefix, const PortLink& link, std::uint32_t vcs,
                      std::uint32_t vc_depth_flits, std::uint32_t flit_bytes, TimePs bin_ps) {
  sim_ = &sim;
  prefix_ = prefix;
  ch_.init(link, vcs, vc_depth_flits, flit_bytes, bin_ps);
  if (!link.connected) return;
  ch_.register_stats(sim.stats(), prefix);
  sim.stats().counter(prefix + ".wire_bytes_total", "B", &ch_.stats().wire_bytes);
  const OutputChannel* ch = &ch_;
  Sim* s = &sim;
  sim.stats().value(prefix + ".utilisation", "fraction", [ch, s] {
    const TimePs t = s->end_time();
    return t == 0 ? 0.0 : static_cast<double>(ch->stats().busy_ps) / static_cast<double>(t);
  });
}

void OutputUnit::register_type(PacketType t) {
  type_registered_[t] = true;
  const std::string base = prefix_ + ".bytes." + proto::PacketType_Name(t);
  sim_->stats().counter(base, "B", &type_bytes_[t]);
  sim_->stats().counter(prefix_ + ".packets." + proto::PacketType_Name(t), "packets", &type_packets_[t]);
}

TimePs OutputUnit::send(Sim& sim, Component& self, PacketHandle h, std::uint32_t vc, TimePs earliest_start,
                        TimePs min_tail) {
  const Packet& p = sim.packets()[h];
  const auto t = static_cast<std::size_t>(p.type) % kPacketTypes;
  if (!type_registered_[t]) register_type(p.type);
  type_bytes_[t] += p.payload_bytes;
  ++type_packets_[t];
  return ch_.transmit(sim, self, h, vc, earliest_start, min_tail);
}

}  // namespace cais::net
