#include "cais/net/output_unit.h"

#include <algorithm>

namespace cais::net {

void OutputUnit::init(Sim& sim, const std::string& prefix, const PortLink& link, std::uint32_t vcs,
                      std::uint32_t vc_depth_flits, std::uint32_t flit_bytes, TimePs bin_ps) {
  sim_ = &sim;
  prefix_ = prefix;
  ch_.init(link, vcs, vc_depth_flits, flit_bytes, bin_ps);
  busy_ps_series_ = TimeSeries{bin_ps};
  if (!link.connected) return;
  ch_.register_stats(sim.stats(), prefix);
  sim.stats().series(prefix + ".busy", "ps", &busy_ps_series_);
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
  type_packets_[t] += p.lines;
  const std::uint64_t bytes = static_cast<std::uint64_t>(p.flits) * ch_.flit_bytes();
  const TimePs tail = ch_.transmit(sim, self, h, vc, earliest_start, min_tail);
  const TimePs ser = serialization_ps(bytes, ch_.link().bw_gbps);
  add_busy(tail > ser ? tail - ser : 0, tail);
  return tail;
}

void OutputUnit::deliver_tail(Sim& sim, Component& self, PacketHandle h, std::uint32_t vc, TimePs tail_ps) {
  const Packet& p = sim.packets()[h];
  const auto t = static_cast<std::size_t>(p.type) % kPacketTypes;
  if (!type_registered_[t]) register_type(p.type);
  type_bytes_[t] += p.payload_bytes;
  type_packets_[t] += p.lines;
  const TimePs ser = serialization_ps(static_cast<std::uint64_t>(p.flits) * ch_.flit_bytes(), ch_.link().bw_gbps);
  ch_.deliver_tail(sim, self, h, vc, tail_ps);
  add_busy(tail_ps > ser ? tail_ps - ser : 0, tail_ps);  // the flits' share, placed before the tail
}

void OutputUnit::add_busy(TimePs from, TimePs to) {
  const TimePs bin = busy_ps_series_.bin_ps();
  while (from < to) {
    const TimePs edge = (from / bin + 1) * bin;
    const TimePs end = std::min(edge, to);
    busy_ps_series_.add(from, static_cast<double>(end - from));
    from = end;
  }
}

}  // namespace cais::net
