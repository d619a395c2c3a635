// NVLink ports of a Hopper GPU: per port an output channel (serialisation, credits per VC), an
// input buffer (the hub sinks packets at line rate and returns credits) and one egress queue
// per traffic class (requests, responses, posted writes). Each class has the VC range the
// switch's VC allocator gives it, and a class's packets are spread over its VCs round robin
// (the next VC with credits for the packet), so one VC's credits do not limit a port.
// Responses go first, then posted writes, then requests. Within a class, packets leave in the
// order they were queued (gpu.egress_arbitration = fifo, the default), or one from each source
// in turn (round_robin; a source is an issue queue: an SM or the copy engine, or the hub for
// its answers), as a crossbar shares the link among the SMs that send: an SM that posts a
// whole tile at once then does not go ahead of the others' tiles.
#pragma once
#include <array>
#include <cstdint>
#include <deque>
#include <vector>

#include "cais/gpu/gpu_context.h"
#include "cais/link.h"
#include "cais/routing.h"

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
  // The smallest VC of any port: a bulk packet must fit in it.
  std::uint32_t min_vc_flits() const { return min_vc_flits_; }

  // `source`: the issue queue that cut the packet (0..num_sms: SMs, copy engine); kHubSource
  // for packets the GPU sends on no queue's behalf (answers, sync requests).
  static constexpr std::uint32_t kHubSource = ~0u;
  void enqueue(PacketHandle h, std::uint32_t port, std::uint32_t cls, std::uint32_t source = kHubSource);
  void pump(std::uint32_t port);  // also kPortFree
  void on_credit(PacketHandle h);
  // An arriving packet enters the port's input buffer and leaves it at once (credits return).
  void receive(PacketHandle h);
  void check_drained() const;

  std::array<std::uint64_t, 20>& tx_bytes() { return tx_bytes_; }
  std::array<std::uint64_t, 20>& tx_packets() { return tx_packets_; }
  std::array<std::uint64_t, 20>& rx_bytes() { return rx_bytes_; }
  std::array<std::uint64_t, 20>& rx_packets() { return rx_packets_; }

 private:
  GpuContext& ctx_;
  std::uint32_t flit_bytes_ = 16, header_flits_ = 1, num_vcs_ = 1, min_vc_flits_ = ~0u;
  bool member_acks_ = false;  // NVLS member acks: answer multicast copies with MM_ACK
  struct VcRange {
    std::uint32_t first = 0, count = 1;
  };
  std::array<VcRange, 3> vcs_of_{};                     // VC range per traffic class
  std::vector<std::array<std::uint32_t, 3>> next_vc_;  // per port and class: round-robin offset
  PlaneHash planes_;
  std::vector<OutputChannel> out_;
  std::vector<InputBuffer> in_;
  // One port's egress queue of a class: a FIFO per source and the sources with packets in
  // service order (round robin: the front source sends one packet and goes to the back).
  struct ClassQueue {
    std::vector<std::deque<PacketHandle>> by_source;
    std::deque<std::uint32_t> ready;
    PacketHandle front() const { return by_source[ready.front()].front(); }
  };
  PacketHandle pop(ClassQueue& q);
  std::uint32_t source_index(std::uint32_t source) const;
  std::vector<std::array<ClassQueue, 3>> queues_;
  std::array<std::uint64_t, 20> tx_bytes_{}, tx_packets_{}, rx_bytes_{}, rx_packets_{};
};

}  // namespace cais::gpu
