// Input unit of one router port: per-VC FIFOs of routed packets plus an injection queue.
//
// Upstream packets occupy a VC of the port's buffer (vc_depth_flits each) and return their
// flits as credits upstream when they leave the buffer (one credit delay plus the reverse
// link's latency later). Packets generated inside the switch (switch features: multicast
// copies, merged writes, responses) enter the injection queue, index num_vcs(): it needs no
// upstream credits and is unbounded, but its packets compete for outputs like any VC.
#pragma once
#include <cstdint>
#include <vector>

#include "cais/component.h"
#include "cais/link.h"
#include "cais/sim.h"

namespace cais::net {

// A packet waiting in an input VC, with the router's per-packet state.
struct InputEntry {
  PacketHandle h = kNoPacket;
  std::uint32_t out_port = 0;
  std::int32_t out_vc = -1;   // downstream VC once the VC allocator granted one
  std::uint32_t flits = 0;        // the packet's flits when forwarded (downstream credits)
  std::uint32_t credit_flits = 0; // buffer flits it occupies here (credits returned upstream)
  TimePs tail_ps = 0;         // tail arrived (or injected) at this time
  TimePs ready_ps = 0;        // head has passed routing, VC and switch allocation stages
  // Flit-level switch allocation (net.sw_alloc_granularity=flit): flit j may cross at
  // max(known_ps, ready_ps + j * flit_step_ps); flits_sent have crossed so far.
  TimePs known_ps = 0;        // the router learnt of the packet (its arrival event)
  TimePs flit_step_ps = 0;    // flit spacing on the incoming link (0: all flits present)
  std::uint32_t flits_sent = 0;
};

// Growable ring of entries (grows only while warming up; no allocation in steady state).
class EntryRing {
 public:
  bool empty() const { return size_ == 0; }
  std::size_t size() const { return size_; }
  InputEntry& front() { return buf_[head_]; }
  const InputEntry& front() const { return buf_[head_]; }
  const InputEntry& at(std::size_t i) const { return buf_[(head_ + i) & (buf_.size() - 1)]; }
  void push(const InputEntry& e);
  InputEntry pop();

 private:
  std::vector<InputEntry> buf_;
  std::size_t head_ = 0, size_ = 0;
};

class InputUnit {
 public:
  // `reverse` is this port's own outgoing link (credits travel back over it); `in_bw_gbps` the
  // bandwidth of the incoming link (for cut-through head times).
  void init(std::uint32_t node, std::uint32_t port, const PortLink& reverse, double in_bw_gbps,
            std::uint32_t num_vcs, std::uint32_t vc_depth_flits, TimePs credit_delay_ps);
  bool connected() const { return reverse_.connected; }
  std::uint32_t num_vcs() const { return num_vcs_; }       // upstream VCs
  std::uint32_t injection_vc() const { return num_vcs_; }  // index of the injection queue
  double in_bw_gbps() const { return in_bw_gbps_; }

  // Buffer an upstream packet on `vc` (e.credit_flits of buffer); throws InvariantError if the
  // sender overran its credits.
  void accept(std::uint32_t vc, const InputEntry& e);
  // Check that `p` fits its VC (used for packets a switch feature takes before buffering).
  void check_fits(const Packet& p) const;
  void inject(const InputEntry& e) { vcs_[num_vcs_].ring.push(e); }
  // An input without an upstream link (a replication queue) has no use for its VC buffers, so
  // they serve as unbounded injection queues, one per traffic class: a response is then never
  // queued behind requests (NVLink keeps requests and responses on separate VCs).
  void inject(const InputEntry& e, std::uint32_t queue);

  bool empty(std::uint32_t vc) const { return vcs_[vc].ring.empty(); }
  InputEntry& head(std::uint32_t vc) { return vcs_[vc].ring.front(); }
  const EntryRing& queue(std::uint32_t vc) const { return vcs_[vc].ring; }
  // Remove the head of `vc`; upstream VCs return its flits as credits at time `at` (>= now).
  InputEntry pop(Sim& sim, Component& self, std::uint32_t vc, TimePs at);
  // Return `flits` credits on `vc` at `at` without buffering (packet taken by a feature).
  void return_credits(Sim& sim, Component& self, std::uint32_t vc, std::uint32_t flits, TimePs at);

  std::uint32_t occupancy_flits(std::uint32_t vc) const { return vcs_[vc].flits; }
  std::uint64_t packets_buffered() const;
  // Return credits to the upstream sender without credit packets when it takes them
  // (cais/deferred_credits.h) and is hosted in this process.
  void allow_direct_credits() { direct_allowed_ = true; }

 private:
  struct Vc {
    EntryRing ring;
    std::uint32_t flits = 0;
  };
  std::uint32_t node_ = 0, port_ = 0, num_vcs_ = 0, depth_ = 0;
  PortLink reverse_;
  double in_bw_gbps_ = 0;
  TimePs credit_delay_ps_ = 0;
  bool direct_allowed_ = false;
  DirectCreditPeer direct_;
  std::vector<Vc> vcs_;  // num_vcs_ upstream VCs + the injection queue
};

}  // namespace cais::net
