// Virtual-channel classes and the VC allocator of one router.
//
// Classes keep protocol-dependent traffic apart (deadlock freedom): requests and responses use
// disjoint VC ranges; with traffic control, loads (READ/CAIS_LD/MM_LD_REDUCE requests) and
// reductions (CAIS_RED/MM_RED/WRITE...) get ranges of their own, and the switch allocator's
// round-robin over VCs alternates between them. Synthetic traffic may use every VC.
//
// Allocation is virtual cut-through: a head packet is granted a downstream VC of its class that
// no other packet holds and that has credits for the whole packet; the VC is held until the
// packet has been sent (as BookSim holds a VC until the tail leaves).
#pragma once
#include <array>
#include <cstdint>
#include <utility>
#include <vector>

#include "cais/link.h"
#include "cais/packet.h"
#include "cais/vc_classes.h"

namespace cais::net {

enum class VcClass : std::uint8_t { kAny, kRequest, kResponse, kLoad, kReduction };

using cais::VcRange;

// Class of a packet type (traffic_control splits requests into loads and reductions).
VcClass vc_class_of(PacketType t, bool traffic_control);
// The CAIS control packets (THROTTLE, SYNC_RELEASE, CAIS_RED_ACK): response-class VCs, but a
// FIFO of their own in a replication queue under traffic control (NvSwitch::injection_queue).
bool is_control_packet(PacketType t);
// VC range of a class for `vcs` VCs per port; throws ConfigError if vcs is too small.
VcRange vc_range(VcClass c, std::uint32_t vcs, bool traffic_control);
using cais::min_vcs;  // minimum VCs per port the classes need (cais/vc_classes.h)

class VcAllocator {
 public:
  // `num_inputs` (crossbar inputs that may wait; 0: as many as ports) may exceed the ports
  // when the router has inputs of its own (replication queues).
  void init(std::uint32_t num_ports, std::uint32_t vcs, bool traffic_control, std::uint32_t num_inputs = 0);
  // Try to grant a downstream VC at `out_port` for a packet of `type` and `flits`. Returns the
  // VC or -1 (then the caller waits for a credit or a release at that output).
  std::int32_t allocate(std::uint32_t out_port, const OutputChannel& ch, PacketType type, std::uint32_t flits);
  void release(std::uint32_t out_port, std::uint32_t vc) { held_[out_port] &= ~(1ull << vc); }
  // Hold a VC another allocator chose (the flit-level router's separable VC allocation).
  void take(std::uint32_t out_port, std::uint32_t vc) { held_[out_port] |= 1ull << vc; }
  // Bit v: VC v of the port is held (at most 64 VCs per port).
  std::uint64_t held_mask(std::uint32_t out_port) const { return held_[out_port]; }
  VcRange range_of(PacketType type) const { return range_by_type_[static_cast<std::size_t>(type) % kPacketTypes]; }
  bool held(std::uint32_t out_port, std::uint32_t vc) const { return (held_[out_port] >> vc) & 1u; }
  std::uint32_t held_count() const;

  // Input VCs waiting for a VC (or credits) at an output: (input port, input vc).
  void wait(std::uint32_t out_port, std::uint32_t in_port, std::uint32_t in_vc);
  // Hands over (and clears) the waiters of `out_port`.
  void take_waiters(std::uint32_t out_port, std::vector<std::pair<std::uint32_t, std::uint32_t>>& out);
  bool has_waiters(std::uint32_t out_port) const { return !waiters_[out_port].empty(); }

 private:
  std::uint32_t vcs_ = 0;
  bool tc_ = false;
  std::array<VcRange, kPacketTypes> range_by_type_{};  // vc_range of each type's class, per packet
  std::vector<std::uint64_t> held_;         // [port] bit v: VC v held
  std::vector<std::uint32_t> rr_;           // [port * 5 + class] next VC offset to try
  std::vector<std::vector<std::pair<std::uint32_t, std::uint32_t>>> waiters_;
  std::vector<std::uint8_t> waiting_;       // [(port * num_inputs + in) * (vcs+1) + vc] dedupe
  std::uint32_t num_ports_ = 0, num_inputs_ = 0;
};

}  // namespace cais::net
