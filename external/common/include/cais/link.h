// Credit-based point-to-point channel primitives shared by GPUs and switches.
//
// OutputChannel is the sender's side of one port: it serialises packets onto the link at the
// link's bandwidth (flit-accurate: header + payload flits) and holds one credit counter per
// virtual channel of the receiver's input buffer. InputBuffer is the receiver's side: one FIFO
// per virtual channel; popping a packet returns its flits as credits to the sender, one link
// latency (plus the configured credit delay) later.
#pragma once
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "cais/component.h"
#include "cais/deferred_credits.h"
#include "cais/params.h"
#include "cais/routing.h"
#include "cais/sim.h"
#include "cais/stats.h"

namespace cais {

// Fixed-capacity ring of packet handles: no allocation after construction.
class HandleRing {
 public:
  void init(std::size_t capacity) { buf_.assign(capacity ? capacity : 1, kNoPacket); }
  bool empty() const { return size_ == 0; }
  bool full() const { return size_ == buf_.size(); }
  std::size_t size() const { return size_; }
  PacketHandle front() const { return buf_[head_]; }
  void push(PacketHandle h);
  PacketHandle pop();
  PacketHandle at(std::size_t i) const { return buf_[(head_ + i) % buf_.size()]; }

 private:
  std::vector<PacketHandle> buf_;
  std::size_t head_ = 0, size_ = 0;
};

// The virtual channels of every port of a system: how many, and how deep each is
// (docs/DESIGN_NOTES.md, "VC buffers"). With net.vc_buffer_scope=lane (the default),
// net.vcs_per_port and net.vc_depth_flits are per NVLink lane: the paper's "eight 256-flit VCs
// per input port" of one NVLink, so a port bundling N lanes has N lanes' VCs and buffering.
// One VC count serves every port, so that a VC index means the same at both ends of every link
// and through a switch: the VCs of the system's narrowest link (`unit_lanes` x net.vcs_per_port),
// each as deep as a wider port needs to hold its lanes' buffering (beside 4-lane ports, a 5-lane
// port has 32 VCs of 320 flits: the 40 x 256 flits of its lanes). With `port` (BookSim's
// meaning; what validation experiments that set net.vc_depth_flits=4096 mean) both keys are per
// port as given. An absent scope is `port`.
struct VcLayout {
  std::uint32_t vcs = 0;         // per port
  std::uint32_t flits = 0;       // net.vc_depth_flits: one VC of the narrowest port
  std::uint32_t unit_lanes = 1;  // lanes of the narrowest link (lane scope; 1 with port scope)
  bool per_lane = false;
  // Reads net.vcs_per_port, net.vc_depth_flits and net.vc_buffer_scope against the topology;
  // throws ConfigError (net.vcs_per_port) if a port would need more than kMaxVcs VCs.
  static VcLayout of(const Sim& sim);
  std::uint32_t depth(const PortLink& link) const {
    if (!per_lane) return flits;
    const std::uint64_t lanes = std::max<std::uint32_t>(1, link.lanes);
    return static_cast<std::uint32_t>((flits * lanes + unit_lanes - 1) / unit_lanes);
  }
  // A packet of `packet_flits` waits for that many credits of one VC: one larger than a VC never
  // leaves (a run that ends in a deadlock). Throws ConfigError (net.vc_depth_flits) naming `what`.
  void require_fits(std::uint32_t packet_flits, const std::string& what) const;
  static constexpr std::uint32_t kMaxVcs = 63;  // the allocators' 64-bit masks, one bit spare
};

struct ChannelStats {
  std::uint64_t packets = 0;
  std::uint64_t flits = 0;
  std::uint64_t wire_bytes = 0;     // flits x flit size (header included)
  std::uint64_t payload_bytes = 0;
  std::uint64_t busy_ps = 0;
  TimeSeries wire_bytes_series{1000000};
};

class OutputChannel {
 public:
  void init(const PortLink& link, std::uint32_t num_vcs, std::uint32_t vc_depth_flits,
            std::uint32_t flit_bytes, TimePs series_bin_ps);
  bool connected() const { return link_.connected; }
  const PortLink& link() const { return link_; }
  std::uint32_t num_vcs() const { return static_cast<std::uint32_t>(credits_.size()); }
  bool has_credits(std::uint32_t vc, std::uint32_t flits) const {
    settle();
    return credits_[vc] >= flits;
  }
  std::uint32_t credits(std::uint32_t vc) const {
    settle();
    return credits_[vc];
  }
  // Every VC's counter, current as of the event being handled (valid until credits change).
  const std::uint32_t* credit_counters() const {
    settle();
    return credits_.data();
  }
  // Changes whenever a credit return is filed or taken: a reader that found too few credits
  // need not read again before it changes or next_deferred_at() (a filed return lands) comes.
  std::uint64_t credit_epoch() const { return credit_epoch_; }
  TimePs next_deferred_at() const { return deferred_.empty() ? kNever : deferred_.front().at; }
  TimePs free_at() const { return busy_until_; }
  bool idle_at(TimePs t) const { return busy_until_ <= t; }
  // Serialise `h` on `vc` starting at max(now, free_at()); consumes credits, sets hop fields
  // and hands the packet to the simulator. Returns the time the tail leaves (link free again).
  TimePs transmit(Sim& sim, Component& sender, PacketHandle h, std::uint32_t vc);
  // Cut-through variant for routers: the head starts at max(earliest_start, free_at()) (which
  // may lie before now when the router forwards the head while the tail was still arriving),
  // and the tail leaves no earlier than max(min_tail, now). Returns the tail time.
  TimePs transmit(Sim& sim, Component& sender, PacketHandle h, std::uint32_t vc, TimePs earliest_start,
                  TimePs min_tail);
  // For receivers that switch flits (a flit-level router): like transmit(), but the packet is
  // announced when its head flit has arrived, with p.tail_ps the time its tail will.
  TimePs transmit_announcing_head(Sim& sim, Component& sender, PacketHandle h, std::uint32_t vc);
  // Flit-level routers: the packet's flits were interleaved with other packets' on this link
  // (the router keeps one flit per cycle per output); its tail leaves at `tail_ps` (>= now).
  // Consumes credits and announces the packet at the tail, as transmit() does.
  void deliver_tail(Sim& sim, Component& sender, PacketHandle h, std::uint32_t vc, TimePs tail_ps);
  void return_credits(std::uint32_t vc, std::uint32_t flits);
  // ---- direct credits (cais/deferred_credits.h). `owner`, the node that sends on this channel,
  // takes its credits without credit packets; an armed return reaches it as an event of kind
  // `wake_kind` with arg32 = `port`, where the credit packet's arrival would have.
  void enable_direct_credits(Sim& sim, Component& owner, std::uint32_t wake_kind, std::uint32_t port);
  bool direct_credits() const { return owner_ != nullptr; }
  // The peer's input returns `flits` on `vc`, arriving at (at, key) (at > now).
  void defer_return(TimePs at, std::uint64_t key, std::uint32_t vc, std::uint32_t flits);
  // The owner would act on a credit arriving at or after `min_at`: arm the first such return
  // (and, while it keeps asking, each one filed later). no_wake(): it would not.
  void want_wake(TimePs min_at);
  void no_wake() { wants_wake_ = false; }
  std::size_t deferred_returns() const { return deferred_.size(); }
  void register_stats(StatsRegistry& reg, const std::string& prefix) const;
  const ChannelStats& stats() const { return stats_; }
  std::uint32_t flit_bytes() const { return flit_bytes_; }
  bool all_credits_home() const;

 private:
  // Credits, statistics and addressing of one packet sent starting at `start`; its serialisation time.
  TimePs take(Sim& sim, Component& sender, PacketHandle h, std::uint32_t vc, TimePs start);
  // Applies the deferred returns the simulation has passed (counters are read lazily).
  void settle() const {
    if (!deferred_.empty() && deferred_.front().at <= sim_->now()) settle_due();
  }
  void settle_due() const;
  void arm_next();
  PortLink link_;
  mutable std::vector<std::uint32_t> credits_;  // mutable: deferred returns land on a read
  mutable DeferredCredits deferred_;
  Sim* sim_ = nullptr;
  Component* owner_ = nullptr;
  std::uint32_t wake_kind_ = 0, wake_port_ = 0;
  bool wants_wake_ = false;
  TimePs wake_from_ = 0;
  std::uint32_t depth_ = 0;
  std::uint32_t flit_bytes_ = 16;
  TimePs busy_until_ = 0;
  std::uint64_t credit_epoch_ = 0;
  ChannelStats stats_;
};

// The upstream sender's channel a returning input files its credits with (direct credits),
// looked up at the first return (every node is built by then); null: credit packets.
class DirectCreditPeer {
 public:
  OutputChannel* get(Sim& sim, const PortLink& reverse, TimePs credit_delay_ps);

 private:
  bool resolved_ = false;
  OutputChannel* ch_ = nullptr;
};

class InputBuffer {
 public:
  // `upstream` is the link from the sending node into this port (credits go back over it).
  void init(std::uint32_t node, std::uint32_t port, const PortLink& reverse, std::uint32_t num_vcs,
            std::uint32_t vc_depth_flits, TimePs credit_delay_ps);
  // Accept an arriving packet; throws InvariantError if the sender overran its credits.
  void accept(Sim& sim, PacketHandle h);
  bool empty(std::uint32_t vc) const { return vcs_[vc].ring.empty(); }
  PacketHandle front(std::uint32_t vc) const { return vcs_[vc].ring.front(); }
  // Remove the head of `vc` and return its credits upstream.
  PacketHandle pop(Sim& sim, Component& self, std::uint32_t vc);
  // accept() and pop() of a packet that leaves the moment it arrives (a sink at line rate).
  void sink(Sim& sim, Component& self, PacketHandle h);
  // Return credits to the upstream sender without credit packets when it takes them
  // (NodeComponent::direct_credit_channel) and is hosted in this process.
  void allow_direct_credits() { direct_allowed_ = true; }
  std::uint32_t num_vcs() const { return static_cast<std::uint32_t>(vcs_.size()); }
  std::uint32_t occupancy_flits(std::uint32_t vc) const { return vcs_[vc].flits; }
  std::uint64_t total_packets() const;

 private:
  struct Vc {
    HandleRing ring;
    std::uint32_t flits = 0;
  };
  void check_room(const Packet& p) const;
  void return_credits(Sim& sim, Component& self, std::uint32_t vc, std::uint32_t flits);
  std::uint32_t node_ = 0, port_ = 0;
  PortLink reverse_;
  std::vector<Vc> vcs_;
  std::uint32_t depth_ = 0;
  TimePs credit_delay_ps_ = 0;
  bool direct_allowed_ = false;
  DirectCreditPeer direct_;
};

// A GPU's NVLink ports: sizes `out`/`in` to the node's ports, initialises each (statistics
// "<name>.port<i>.tx" for connected ports) and returns the address-hashed plane choice weighted
// by each port's lanes (128 B granule), as every GPU-side model needs it.
PlaneHash init_endpoint_ports(Sim& sim, std::uint32_t node, const std::string& name,
                              const VcLayout& vcs, std::uint32_t flit_bytes,
                              std::vector<OutputChannel>& out, std::vector<InputBuffer>& in);

}  // namespace cais
