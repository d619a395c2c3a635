// NVLink ports of a Hopper GPU: per port an output channel (serialisation, credits per VC), an
// input buffer (the hub sinks packets at line rate and returns credits) and one egress queue
// per traffic class (requests, responses, posted writes). Each class has the VC range the
// switch's VC allocator gives it, and a class's packets are spread over its VCs round robin
// (the next VC with credits for the packet), so one VC's credits do not limit a port.
// The classes take turns packet by packet in two pools that alternate (spec 3.6 (3)): without
// traffic control the response VCs and the request VCs (requests and posted writes, which take
// turns within), with it the load class (requests and responses, taking turns) and the
// reduction class (posted writes). No class waits for another's backlog: a GPU that answers a
// burst of peers' loads still sends its own requests. Posted SM stores wait at the SM, not
// here, while the port has no credits for them (post_room), so they queue no deeper than the
// network's buffers.
#pragma once
#include <array>
#include <cstdint>
#include <deque>
#include <vector>

#include "cais/gpu/gpu_context.h"
#include "cais/link.h"
#include "cais/routing.h"
#include "cais/vc_classes.h"

namespace cais::gpu {

class NvlinkPorts {
 public:
  explicit NvlinkPorts(GpuContext& ctx);
  // Reads net.* and sizes the ports to the node's links; false if the GPU has no link.
  bool init();

  std::uint32_t plane(std::uint64_t addr) const { return planes_.plane(addr); }
  std::uint32_t plane_for_key(std::uint32_t key) const { return planes_.plane_for_key(key); }
  std::uint32_t flits(std::uint32_t payload_bytes) const { return flits_for(payload_bytes, flit_bytes_, header_flits_); }
  // Flits of `lines` separate packets of payload_bytes / lines each (a bulk packet).
  std::uint32_t flits(std::uint32_t payload_bytes, std::uint32_t lines) const {
    return flits_for_lines(payload_bytes, lines, flit_bytes_, header_flits_);
  }
  bool member_acks() const { return member_acks_; }
  std::uint32_t num_ports() const { return static_cast<std::uint32_t>(out_.size()); }
  // Whether bulk packets of `lines` data lines (`line_flits` each) leave every class that
  // carries data (posted writes, responses) on every port free of the credit limit single
  // lines leave it: a VC of D flits holds floor(D / (lines x line_flits)) bulks, so its class
  // holds fewer lines than single packets would; that may cost nothing only while the class
  // still holds what its link sends in a credit round trip (2 x link latency + credit delay +
  // the bulk's serialisation). docs/PERFORMANCE.md, "Bulk packets".
  bool bulk_keeps_credit_loop(std::uint32_t lines, std::uint32_t line_flits) const;

  void enqueue(PacketHandle h, std::uint32_t port, std::uint32_t cls);
  // Posted SM stores (gpu.posted_stores): a store line of up to `flits` may enter `port` while
  // the store flits waiting there plus `flits` fit the free credits of the posted class's VCs.
  bool post_room(std::uint32_t port, std::uint32_t flits) const;
  // A store line of `flits` cut for `port`: reserved until its packet goes on the wire.
  void reserve_post(std::uint32_t port, std::uint32_t flits) { post_reserved_[port] += flits; }
  std::uint64_t post_reserved(std::uint32_t port) const { return post_reserved_[port]; }
  void pump(std::uint32_t port);  // also kPortFree
  void on_credit(PacketHandle h);
  // Direct credits (cais/deferred_credits.h): the switch at the other end, hosted in this
  // process, files its input's credit returns on the port's channel instead of sending credit
  // packets. A credit packet's arrival pumps the port and resumes the SMs' posted stores that
  // wait for it; that does something only while the port has packets queued and is idle when
  // the credit lands (a port that frees at that very time included), or while posted stores
  // wait. rearm() asks for a wake at exactly those returns, so results equal credit packets'.
  OutputChannel* direct_credit_channel(std::uint32_t port);
  void rearm(std::uint32_t port);
  void on_credit_wake(std::uint32_t port);
  // An arriving packet enters the port's input buffer and leaves it at once (credits return).
  void receive(PacketHandle h);
  void check_drained() const;

  std::array<std::uint64_t, 20>& tx_bytes() { return tx_bytes_; }
  std::array<std::uint64_t, 20>& tx_packets() { return tx_packets_; }
  std::array<std::uint64_t, 20>& rx_bytes() { return rx_bytes_; }
  std::array<std::uint64_t, 20>& rx_packets() { return rx_packets_; }

 private:
  GpuContext& ctx_;
  std::uint32_t flit_bytes_ = 16, header_flits_ = 1, num_vcs_ = 1;
  struct CreditLoop {
    std::uint32_t vc_flits;  // one VC's depth
    double bytes_per_ps;     // the link's rate
    TimePs round_trip_ps;    // to the peer's input and its credit back, without serialisation
  };
  std::vector<CreditLoop> credit_loops_;  // per connected port
  bool member_acks_ = false;  // NVLS member acks: answer multicast copies with MM_ACK
  std::array<VcRange, 3> vcs_of_{};                     // VC range per traffic class
  std::vector<std::array<std::uint32_t, 3>> next_vc_;  // per port and class: round-robin offset
  PlaneHash planes_;
  std::vector<OutputChannel> out_;
  std::vector<InputBuffer> in_;
  std::vector<std::array<std::deque<PacketHandle>, 3>> queues_;
  std::vector<std::uint64_t> post_reserved_;  // per port: flits of posted store lines not yet sent
  // Egress arbitration: two pools of classes (pools_[p][0..pool_size_[p])); per port the pool
  // whose turn it is and, per pool, the member whose turn it is.
  std::array<std::array<std::uint32_t, 2>, 2> pools_{};
  std::array<std::uint32_t, 2> pool_size_{};
  std::array<std::uint8_t, 3> pool_of_{};  // per class: its pool
  std::vector<std::array<std::uint8_t, 3>> turn_;  // per port: [0] pool first, [1 + p] member first in pool p
  std::array<std::uint64_t, 20> tx_bytes_{}, tx_packets_{}, rx_bytes_{}, rx_packets_{};
};

}  // namespace cais::gpu
