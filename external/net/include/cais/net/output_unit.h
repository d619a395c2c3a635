// Output unit of one router port: the link's sender side (serialisation, credits per downstream
// VC) plus per-port statistics (bytes by packet type, utilisation, wire-byte time series).
#pragma once
#include <array>
#include <cstdint>
#include <string>

#include "cais/link.h"
#include "cais/sim.h"
#include "cais/stats.h"

namespace cais::net {

class OutputUnit {
 public:
  void init(Sim& sim, const std::string& prefix, const PortLink& link, std::uint32_t vcs,
            std::uint32_t vc_depth_flits, std::uint32_t flit_bytes, TimePs bin_ps);
  OutputChannel& channel() { return ch_; }
  const OutputChannel& channel() const { return ch_; }
  bool connected() const { return ch_.connected(); }
  // Cut-through send of `h` on downstream `vc`: head leaves at max(earliest_start, link free),
  // tail no earlier than min_tail. Returns the tail time.
  TimePs send(Sim& sim, Component& self, PacketHandle h, std::uint32_t vc, TimePs earliest_start, TimePs min_tail);
  // Flit-level routers: `h`'s flits were interleaved on the link, its tail leaves at `tail_ps`.
  void deliver_tail(Sim& sim, Component& self, PacketHandle h, std::uint32_t vc, TimePs tail_ps);

 private:
  void register_type(PacketType t);
  void add_busy(TimePs from, TimePs to);
  Sim* sim_ = nullptr;
  TimeSeries busy_ps_series_{1000000};  // link busy time per bin (utilisation = busy / bin)
  std::string prefix_;
  OutputChannel ch_;
  std::array<std::uint64_t, kPacketTypes> type_bytes_{};
  std::array<std::uint64_t, kPacketTypes> type_packets_{};
  std::array<bool, kPacketTypes> type_registered_{};
};

}  // namespace cais::net
