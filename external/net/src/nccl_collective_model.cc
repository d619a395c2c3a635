// NCCL collective model (GPU model "collective"): the REFERENCE model of NCCL's collectives,
// calibrated against measured NCCL (docs/VALIDATION.md, calibration=nccl228_h200). It is not a
// GPU: it replays NCCL's channel/slice protocol as packet traffic through the switches (ring
// all_reduce / all_gather / reduce_scatter, NVLS all_reduce one- and two-shot). Collectives
// lowered to tile-ISA kernels and run on the Hopper engine (external/gpu) are checked against
// it. It lives in the network engine because it needs nothing of the GPU engine but packets.
//
// What is modelled, and why (NCCL 2.18-2.21, src/device/prims_simple.h, all_reduce.h):
//   * channels: one NCCL channel is one CTA; each executes its schedule (collective_schedule.h)
//     sequentially, slice by slice.
//   * ring, Simple protocol: a slice is sent as posted NVLink writes of up to
//     collective.packet_bytes (128 B); writes are acknowledged by the receiver (an NVLink write
//     response of one header flit per collective.writes_per_response packets). After a slice's
//     data the post warp fences (__threadfence_system: waits for that slice's write responses)
//     and posts the tail flag (an 8 B write) to the next rank, while the workers go on with the
//     next slice (collective.overlap_fence; NCCL 2.28 prims_simple.h: nworkers = nthreads - 32,
//     the post-send thread is in the last warp); the next rank's CTA may consume the slice only
//     once that flag has arrived (synchronisation through the data itself), and after consuming
//     it posts the head flag back, which frees one of collective.buffer_slices buffer slots
//     (NCCL_STEPS / SLICESTEPS) the sender may have in flight.
//   * CTA throughput: with collective.cta_bw_gbps > 0 the CTA moves a slice at that rate (send
//     primitives issue their packets spaced accordingly; receive-only primitives copy the slice
//     to the output in that time), so a channel cannot send while it copies out, as in NCCL;
//     collective.cta_jitter_cv varies it from slice to slice. A GPU port sends the channels'
//     requests in one FIFO, round robin, or round robin over TPCs (collective.egress), optionally
//     with a bound on the bytes a channel may have waiting (collective.egress_bound_bytes: the
//     SM's store path).
//   * NVLS: the reduce warps of each channel issue multimem.ld_reduce (MM_LD_REDUCE_REQ) of
//     up to collective.nvls_outstanding_bytes in flight (memory-level parallelism of those warps)
//     and multimem.st (MM_ST) each reduced packet to the multicast group as soon as it returns.
//     The switch (NVLS feature) reads every member with READ_REQ, which this node answers.
//   * bulk packets: collective.packet_multiple = N merges N consecutive 128 B packets into one
//     simulated packet that occupies the wire exactly as the N packets would (N headers), so
//     bytes on links are identical and only arbitration granularity changes (test: converges as
//     N -> 1).
// Statistics: besides bytes and flags, where the channels' time goes (wait_data_ps, wait_slot_ps,
// fence_ps, summed over channels; the rest is CTA copying and idle after the last slice).
// Functional mode (collective.functional): packets carry float values (4 B elements); every rank
// checks its output against the sums computed in closed form and counts mismatches.
#include <algorithm>
#include <array>
#include <cmath>
#include <deque>
#include <memory>
#include <sstream>

#include "cais/engine_host.h"
#include "cais/errors.h"
#include "cais/link.h"
#include "cais/net/collective_schedule.h"
#include "cais/routing.h"
#include "cais/sim.h"

namespace cais::net {
namespace {

enum EventKind : std::uint32_t { kPortFree = 2, kStart = 3, kCtaStep = 4 };
constexpr std::uint32_t kReqVc = 0;
constexpr std::uint64_t kElemBytes = 4;
constexpr std::uint64_t kFlagBytes = 8;
constexpr std::uint64_t kOffsetMask = (1ull << 39) - 1;
constexpr std::uint64_t kFlagSpace = 1ull << 39;
constexpr std::uint64_t kMulticastSpace = 1ull << 47;

// tag layout: [0,16) channel, [16,18) kind, 18 final-data bit, [32,64) flag sequence number
enum TagKind : std::uint64_t { kData = 0, kTail = 1, kHead = 2 };
inline std::uint64_t make_tag(std::uint32_t ch, TagKind k, bool fin, std::uint64_t seq) {
  return ch | (static_cast<std::uint64_t>(k) << 16) | (static_cast<std::uint64_t>(fin) << 18) | (seq << 32);
}
inline std::uint32_t tag_channel(std::uint64_t t) { return static_cast<std::uint32_t>(t & 0xffff); }
inline TagKind tag_kind(std::uint64_t t) { return static_cast<TagKind>((t >> 16) & 3); }
inline bool tag_final(std::uint64_t t) { return (t >> 18) & 1; }
inline std::uint64_t tag_seq(std::uint64_t t) { return t >> 32; }

// Input value of element i on rank r: small integers, so every sum is exact in floating point.
inline double input_value(std::uint32_t r, std::uint64_t i) { return static_cast<double>((r + 1) * 3 + (i % 101)); }

class NcclCollectiveModel : public NodeComponent {
 public:
  NcclCollectiveModel(Sim& sim, std::uint32_t node) : NodeComponent(sim, sim.node(node).name, node << 8), node_(node) {
    const Params& p = sim.params();
    op_ = parse_coll_op(p.get_string("collective.op"));
    algo_ = parse_coll_algo(p.get_string("collective.algo"));
    nvls_one_shot_ = p.get_enum("collective.nvls_variant", {"two_shot", "one_shot"}) == "one_shot";
    bytes_ = p.get_uint("collective.bytes");
    const auto ring_channels = p.get_uint("collective.channels");
    const auto nvls_channels = p.get_uint("collective.nvls_channels");
    channels_ = static_cast<std::uint32_t>(algo_ == CollAlgo::kNvls ? nvls_channels : ring_channels);
    const std::uint64_t chunk = p.get_uint("collective.chunk_bytes");
    const auto slices = static_cast<std::uint32_t>(p.get_uint("collective.slices_per_chunk"));
    slots_ = p.get_uint("collective.buffer_slices");
    const std::uint64_t nvls_chunk = p.get_uint("collective.nvls_chunk_bytes");
    nvls_outstanding_ = p.get_uint("collective.nvls_outstanding_bytes");
    packet_bytes_ = p.get_uint("collective.packet_bytes");
    const std::uint64_t multiple = p.get_uint("collective.packet_multiple");
    functional_ = p.get_bool("collective.functional");
    overlap_fence_ = p.get_bool("collective.overlap_fence");
    egress_ = parse_egress(p.get_enum("collective.egress", {"fifo", "round_robin", "tpc_round_robin"}));
    paired_ctas_ = static_cast<std::uint32_t>(p.get_uint("collective.paired_ctas"));
    paired_weight_ = p.get_double("collective.paired_tpc_weight");
    if (!(paired_weight_ > 0)) throw ConfigError("collective.paired_tpc_weight", "must be > 0");
    egress_bound_ = p.get_uint("collective.egress_bound_bytes");
    const double overhead_ns = p.get_double("collective.kernel_overhead_ns");
    if (overhead_ns < 0) throw ConfigError("collective.kernel_overhead_ns", "must be >= 0");
    if (!(overhead_ns <= Params::kMaxTimeNs)) throw ConfigError("collective.kernel_overhead_ns", "must be <= 1e12");
    p.get_time_ps("collective.start_ns");  // checked: >= 0 and not huge
    start_ps_ = ns_to_ps(p.get_double("collective.start_ns") + (algo_ == CollAlgo::kRing ? overhead_ns : 0.0));
    init_prim_rates(p);
    jitter_cv_ = p.get_double("collective.cta_jitter_cv");
    if (jitter_cv_ < 0 || jitter_cv_ > 0.3) throw ConfigError("collective.cta_jitter_cv", "must be in [0, 0.3]");
    seed_ = sim.seed();
    writes_per_response_ = static_cast<std::uint32_t>(p.get_uint("collective.writes_per_response"));
    if (writes_per_response_ == 0) throw ConfigError("collective.writes_per_response", "must be >= 1");
    flit_bytes_ = static_cast<std::uint32_t>(p.get_uint("net.flit_bytes"));
    header_flits_ = static_cast<std::uint32_t>(p.get_uint("net.header_flits"));
    const VcLayout vc_layout = VcLayout::of(sim);
    const std::uint32_t vcs = vc_layout.vcs;
    const std::uint32_t depth = vc_layout.flits;  // the shallowest port's VC
    if (vcs < 2) throw ConfigError("net.vcs_per_port", "the collective GPU model needs >= 2 (requests, responses)");
    resp_vc_ = vcs / 2;  // requests in the lower half, responses in the upper (router VC classes)
    // Per-lane VC buffers (the paper's): spread each class over its VCs like the GPU hub. Per-port
    // buffers: one VC per class, the buffering the validation results were obtained with.
    class_vcs_ = vc_layout.per_lane ? std::array<std::uint32_t, 2>{vcs / 2, vcs - vcs / 2} : std::array<std::uint32_t, 2>{1, 1};
    member_acks_ = p.has("net.nvls.member_acks") && p.get_bool("net.nvls.member_acks");
    if (packet_bytes_ == 0 || packet_bytes_ % kElemBytes) throw ConfigError("collective.packet_bytes", "must be a positive multiple of 4");
    if (multiple == 0) throw ConfigError("collective.packet_multiple", "must be >= 1");
    if (slots_ == 0) throw ConfigError("collective.buffer_slices", "must be >= 1");
    if (algo_ == CollAlgo::kNvls && nvls_outstanding_ == 0) throw ConfigError("collective.nvls_outstanding_bytes", "must be > 0");
    if (channels_ == 0 || channels_ > 0xffff) throw ConfigError("collective.channels", "must be in 1..65535");
    bulk_bytes_ = packet_bytes_ * multiple;
    if (wire_flits(bulk_bytes_) > depth)
      throw ConfigError("collective.packet_multiple", "a bulk packet of " + std::to_string(wire_flits(bulk_bytes_)) +
                                                          " flits does not fit a VC of net.vc_depth_flits=" + std::to_string(depth));
    nranks_ = sim.num_gpus();
    if (nranks_ < 2) throw ConfigError("system.gpus", "a collective needs at least 2 GPUs");
    if (node_ >= nranks_) throw ConfigError("topology", "GPU node ids must be 0..G-1");

    if (algo_ == CollAlgo::kRing) {
      RingParams rp;
      rp.op = op_;
      rp.nranks = nranks_;
      rp.bytes = bytes_;
      rp.channels = channels_;
      rp.chunk_bytes = chunk;
      rp.slices_per_chunk = slices;
      rp.align_bytes = 16;
      ring_ = build_ring_schedule(rp, node_);
      space_bytes_ = ring_.space_bytes;
      shard_bytes_ = ring_.shard_bytes;
      chans_.resize(channels_);
      egress_bytes_.assign(channels_, 0);
      for (std::uint32_t c = 0; c < channels_; ++c) {
        std::uint64_t sends = 0, recvs = 0;
        for (const auto& o : ring_.channels[c]) {
          sends += prim_send(o.prim);
          recvs += prim_recv(o.prim);
        }
        chans_[c].tails.assign(recvs, 0);
        chans_[c].heads.assign(sends, 0);
      }
    } else {
      if (op_ != CollOp::kAllReduce) throw ConfigError("collective.algo", "nvls is modelled for all_reduce only");
      nvls_ = build_nvls_schedule(bytes_, nranks_, node_, channels_, nvls_chunk, nvls_one_shot_, 16);
      space_bytes_ = shard_bytes_ = bytes_;
      nvls_chans_.resize(channels_);
      for (std::uint32_t c = 0; c < channels_; ++c)
        for (const auto& r : nvls_[c]) nvls_load_total_ += r.bytes;
    }
    if (functional_) {
      const std::uint64_t elems = space_bytes_ / kElemBytes;
      if (space_bytes_ % kElemBytes) throw ConfigError("collective.bytes", "functional mode needs a multiple of 4 bytes");
      if (elems > (1ull << 26)) throw ConfigError("collective.functional", "functional mode is for small sizes (<= 256 MB)");
      out_vals_.assign(elems, std::nan(""));
      if (algo_ == CollAlgo::kRing) {
        rs_in_.assign(elems, std::nan(""));
        ag_in_.assign(elems, std::nan(""));
      }
    }

    rng_weights(sim, vc_layout);
    const std::string pre = name() + ".collective";
    sim.stats().value(pre + ".finish_time", "ps", [this] { return static_cast<double>(finish_ps_); });
    // The channel that finished first: with finish_time, how unevenly the channels progressed.
    sim.stats().value(pre + ".first_channel_done", "ps", [this] {
      return chan_done_first_ps_ == kNever ? 0.0 : static_cast<double>(chan_done_first_ps_);
    });
    sim.stats().counter(pre + ".data_tx_bytes", "B", &data_tx_bytes_);
    sim.stats().counter(pre + ".data_rx_bytes", "B", &data_rx_bytes_);
    sim.stats().counter(pre + ".flags_tx", "packets", &flags_tx_);
    sim.stats().counter(pre + ".ld_reduce_bytes", "B", &nvls_loads_done_);
    sim.stats().counter(pre + ".multicast_rx_bytes", "B", &mc_rx_bytes_);
    sim.stats().counter(pre + ".reads_served_bytes", "B", &reads_served_bytes_);
    sim.stats().counter(pre + ".wait_data_ps", "ps", &wait_data_ps_);
    sim.stats().counter(pre + ".wait_slot_ps", "ps", &wait_slot_ps_);
    sim.stats().counter(pre + ".fence_ps", "ps", &fence_ps_);
    // How long write responses spend in the network (a fence waits for the slowest of a slice's).
    sim.stats().histogram(pre + ".write_ack_latency", "ns", &ack_latency_ns_);
    sim.stats().counter(pre + ".egress_wait_ps", "ps", &egress_wait_ps_);
    sim.stats().counter(pre + ".functional_checked", "elements", &checked_);
    sim.stats().counter(pre + ".functional_errors", "elements", &errors_);
    schedule(start_ps_, kStart);
  }

  void handle(const Event& e) override {
    switch (e.kind) {
      case kPacketArrival: return on_arrival(static_cast<PacketHandle>(e.arg));
      case kPortFree: return pump(e.arg32);
      case kCtaStep: return cta_step(e.arg32);
      case kStart:
        if (algo_ == CollAlgo::kRing)
          for (std::uint32_t c = 0; c < channels_; ++c) ring_advance(c);
        else
          for (std::uint32_t c = 0; c < channels_; ++c) nvls_issue(c);
        update_finish();
        return;
      default: throw InvariantError(name() + ": unknown event");
    }
  }

  bool done() const override { return finished_; }

  std::string blocked_reason() const override {
    if (finished_) return {};
    std::ostringstream os;
    if (algo_ == CollAlgo::kRing) {
      for (std::uint32_t c = 0; c < channels_; ++c) {
        const auto& ch = chans_[c];
        if (ch.pc < ring_.channels[c].size()) {
          os << "channel " << c << " at slice " << ch.pc << "/" << ring_.channels[c].size() << " (tails " << ch.tail_contig
             << ", heads " << ch.head_contig << ", sent " << ch.send_idx << ", unacked " << ch.unacked[0] + ch.unacked[1]
             << (ch.posting ? ", fencing" : "") << ")";
          return os.str();
        }
      }
      os << "acks outstanding: " << unacked_total_;
    } else {
      os << "ld_reduce " << nvls_loads_done_ << "/" << nvls_load_total_ << " B, multicast received " << mc_rx_bytes_ << "/"
         << (nvls_one_shot_ ? 0 : bytes_) << " B";
    }
    return os.str();
  }

  void check_drained() const override {
    for (const auto& o : out_)
      if (o.connected() && !o.all_credits_home()) throw InvariantError(name() + ": credits not returned at end of run");
    if (!finished_) throw InvariantError(name() + ": collective incomplete: " + blocked_reason());
  }

 private:
  // A channel is NCCL's worker threads (copying slice pc) plus the post warp, which fences a
  // finished send slice and then posts its flags. The workers may copy the next slice meanwhile
  // (collective.overlap_fence), but pass the end-of-slice barrier only once the post warp is free.
  struct RingChan {
    std::size_t pc = 0;         // slice the workers are on
    bool busy = false;          // workers copying slice pc
    bool at_barrier = false;    // workers done with slice pc, waiting for the post warp
    bool posting = false;       // post warp fencing slice post_pc
    bool stalled = false;       // workers blocked by the post warp since stall_since
    bool egress_blocked = false;  // CTA stores stalled by a full egress since egress_since
    TimePs egress_since = 0;
    std::size_t post_pc = 0;
    std::uint8_t post_parity = 0;
    std::uint8_t waiting = 0;  // WaitKind
    TimePs since = 0, stall_since = 0;
    std::uint64_t issue_off = 0;
    std::uint64_t send_started = 0, recv_started = 0;  // slices begun (NCCL's worker step)
    std::uint64_t send_idx = 0, recv_idx = 0;          // flags posted
    std::uint64_t unacked[2] = {0, 0};                 // data writes unacknowledged, by send-slice parity
    std::vector<std::uint8_t> tails, heads;
    std::uint64_t tail_contig = 0, head_contig = 0;
    TimePs done_ps = 0;  // when the channel's last slice was posted
  };
  struct NvlsChan {
    std::size_t ri = 0;
    std::uint64_t ro = 0, inflight = 0;
  };

  void rng_weights(Sim& sim, const VcLayout& vcs) {
    planes_ = init_endpoint_ports(sim, node_, name(), vcs, flit_bytes_, out_, in_);
    queues_.resize(out_.size());
    req_.resize(out_.size());
    next_vc_.assign(out_.size(), {0, 0});
  }

  // Flits of `payload` bytes sent as ceil(payload / packet_bytes) NVLink packets.
  std::uint32_t wire_flits(std::uint64_t payload) const {
    if (payload == 0) return header_flits_;
    const std::uint64_t full = payload / packet_bytes_, rest = payload % packet_bytes_;
    std::uint64_t f = full * flits_for(static_cast<std::uint32_t>(packet_bytes_), flit_bytes_, header_flits_);
    if (rest) f += flits_for(static_cast<std::uint32_t>(rest), flit_bytes_, header_flits_);
    return static_cast<std::uint32_t>(f);
  }
  std::uint32_t subpackets(std::uint64_t payload) const {
    return static_cast<std::uint32_t>(std::max<std::uint64_t>(1, (payload + packet_bytes_ - 1) / packet_bytes_));
  }
  std::uint32_t next_rank() const { return (node_ + 1) % nranks_; }
  std::uint32_t prev_rank() const { return (node_ + nranks_ - 1) % nranks_; }

  PacketHandle make(PacketType t, std::uint32_t dst, std::uint64_t addr, std::uint64_t payload, std::uint32_t flits,
                    std::uint64_t tag) {
    const PacketHandle h = sim_.new_packet(*this);
    Packet& p = sim_.packets()[h];
    p.type = t;
    p.src = node_;
    p.dst = dst;
    p.addr = addr;
    p.payload_bytes = static_cast<std::uint32_t>(payload);
    p.flits = flits;
    p.tag = tag;
    p.inject_ps = sim_.now();
    return h;
  }

  void enqueue(PacketHandle h, std::uint32_t vc) {
    const std::uint32_t port = planes_.plane(sim_.packets()[h].addr);
    if (vc != kReqVc) {
      queues_[port][1].push_back(h);
    } else {
      // Requests wait per channel (one CTA's stores) in arbitration groups (egress_group); the
      // port serves the groups round robin and, within a group, its channels round robin.
      const std::uint32_t c = egress_ == Egress::kFifo ? 0 : tag_channel(sim_.packets()[h].tag);
      const std::uint32_t g = egress_group(c);
      RequestQueues& r = req_[port];
      if (r.by_chan.size() <= c) r.by_chan.resize(c + 1);
      if (r.members.size() <= g) r.members.resize(g + 1);
      if (r.by_chan[c].empty()) {
        if (r.members[g].empty()) {
          r.groups.push_back(g);
          if (weighted_egress()) {
            if (r.pass.size() <= g) r.pass.resize(g + 1, 0.0);
            r.pass[g] = std::max(r.pass[g], r.vtime);  // an idle TPC earns no credit
          }
        }
        r.members[g].push_back(c);
      }
      r.by_chan[c].push_back(h);
    }
    pump(port);
  }

  void pump(std::uint32_t port) {
    OutputChannel& ch = out_[port];
    if (!ch.idle_at(sim_.now())) return;  // a kPortFree event is pending
    auto& resp = queues_[port][1];
    const std::int32_t rvc = resp.empty() ? -1 : pick_vc(port, 1, sim_.packets()[resp.front()].flits);
    if (rvc >= 0) {
      const PacketHandle h = resp.front();
      resp.pop_front();
      schedule(ch.transmit(sim_, *this, h, static_cast<std::uint32_t>(rvc)), kPortFree, 0, port);
      return;
    }
    RequestQueues& r = req_[port];
    if (r.groups.empty()) return;
    if (weighted_egress()) {  // least service per weight first
      auto best = r.groups.begin();
      for (auto it = r.groups.begin(); it != r.groups.end(); ++it)
        if (r.pass[*it] < r.pass[*best]) best = it;
      const std::uint32_t b = *best;
      r.groups.erase(best);
      r.groups.push_front(b);
    }
    const std::uint32_t g = r.groups.front();
    auto& members = r.members[g];
    const std::uint32_t c = members.front();
    auto& q = r.by_chan[c];
    const PacketHandle h = q.front();
    const std::int32_t vc = pick_vc(port, 0, sim_.packets()[h].flits);
    if (vc < 0) return;
    q.pop_front();
    members.pop_front();
    if (!q.empty()) members.push_back(c);
    r.groups.pop_front();
    if (!members.empty()) r.groups.push_back(g);
    if (weighted_egress()) {
      r.vtime = r.pass[g];
      r.pass[g] += sim_.packets()[h].flits / (g < paired_ctas_ / 2 ? paired_weight_ : 1.0);
    }
    const Packet& p = sim_.packets()[h];
    if (algo_ == CollAlgo::kRing && p.type == proto::PKT_WRITE && tag_kind(p.tag) == kData) {
      const std::uint32_t pc = tag_channel(p.tag);
      egress_bytes_[pc] -= p.payload_bytes;
      if (chans_[pc].egress_blocked && egress_bytes_[pc] < egress_bound_) {
        chans_[pc].egress_blocked = false;
        egress_wait_ps_ += sim_.now() - chans_[pc].egress_since;
        schedule(sim_.now(), kCtaStep, 0, pc);
      }
    }
    schedule(ch.transmit(sim_, *this, h, static_cast<std::uint32_t>(vc)), kPortFree, 0, port);
  }

  // The next VC of class `cls` (0 requests, 1 responses) with credits for `flits`, round robin
  // over the class's VCs; -1 if none (a credit return pumps the port again).
  std::int32_t pick_vc(std::uint32_t port, std::uint32_t cls, std::uint32_t flits) {
    const std::uint32_t first = cls ? resp_vc_ : kReqVc, count = class_vcs_[cls];
    std::uint32_t& next = next_vc_[port][cls];
    for (std::uint32_t i = 0; i < count; ++i) {
      const std::uint32_t vc = first + (next + i) % count;
      if (out_[port].has_credits(vc, flits)) {
        next = (next + i + 1) % count;
        return static_cast<std::int32_t>(vc);
      }
    }
    return -1;
  }

  // collective.egress: fifo (one queue in issue order), round_robin (every channel its own
  // group) or tpc_round_robin: a group per TPC, the unit that competes for the GPU's NVLink
  // egress. CUDA places a plain grid's first collective.paired_ctas CTAs two to a TPC and the
  // rest one per TPC (%smid of an NCCL-like ring on H200, docs/MEASUREMENTS.md call 16; NCCL
  // itself launches clusters of 4 and is placed otherwise, calls 17-20), so under contention
  // each of those CTAs gets half the share of a CTA that has its TPC to itself.
  enum class Egress { kFifo, kRoundRobin, kTpcRoundRobin };
  static Egress parse_egress(const std::string& s) {
    return s == "fifo" ? Egress::kFifo : s == "round_robin" ? Egress::kRoundRobin : Egress::kTpcRoundRobin;
  }
  // Shared TPCs with a weight other than 1 need stride scheduling; otherwise plain turns.
  bool weighted_egress() const { return egress_ == Egress::kTpcRoundRobin && paired_weight_ != 1.0; }
  std::uint32_t egress_group(std::uint32_t c) const {
    if (egress_ != Egress::kTpcRoundRobin) return c;
    const std::uint32_t paired = paired_ctas_ & ~1u;
    return c < paired ? c / 2 : paired / 2 + (c - paired);
  }

  // ------------------------------------------------------------------ functional values
  // Value the primitive sends / writes for element i (the reduce/gather buffers hold what
  // arrived from the previous rank).
  double recv_val(Prim prim, std::uint64_t i) const { return prim_reduce(prim) ? rs_in_[i] : ag_in_[i]; }
  double result_val(Prim prim, std::uint64_t i) const {
    switch (prim) {
      case Prim::kSend:
      case Prim::kCopySend: return input_value(node_, i);
      case Prim::kRecvReduceSend:
      case Prim::kRecvReduceCopySend:
      case Prim::kRecvReduceCopy: return rs_in_[i] + input_value(node_, i);
      default: return ag_in_[i];
    }
  }
  double expected(std::uint64_t i) const {
    if (op_ == CollOp::kAllGather) return input_value(static_cast<std::uint32_t>(i * kElemBytes / shard_bytes_), i);
    double s = 0;
    for (std::uint32_t r = 0; r < nranks_; ++r) s += input_value(r, i);
    return s;
  }

  // ------------------------------------------------------------------ ring
  void ring_advance(std::uint32_t c) {
    RingChan& ch = chans_[c];
    const auto& ops = ring_.channels[c];
    while (!ch.busy && !ch.at_barrier && ch.pc < ops.size()) {
      if (ch.posting && !overlap_fence_) return stall(ch);  // workers wait for their own fence
      const SliceOp& op = ops[ch.pc];
      const bool rv = prim_recv(op.prim), sd = prim_send(op.prim);
      if (rv && ch.tail_contig <= ch.recv_started) return begin_wait(ch, kWaitData);          // data not there yet
      if (sd && ch.send_started >= ch.head_contig + slots_) return begin_wait(ch, kWaitSlot);  // no free slot
      end_wait(ch);
      ch.send_started += sd;
      ch.recv_started += rv;
      if (functional_ && prim_writes_output(op.prim))
        for (std::uint64_t i = op.offset / kElemBytes; i < (op.offset + op.bytes) / kElemBytes; ++i)
          out_vals_[i] = result_val(op.prim, i);
      if (op.bytes && prim_rate_[static_cast<int>(op.prim)] > 0) {  // the CTA copies the slice at its own rate
        ch.busy = true;
        ch.issue_off = 0;
        cta_step(c);
        return;
      }
      if (sd && op.bytes)
        for (std::uint64_t off = 0; off < op.bytes; off += bulk_bytes_)
          emit_data(c, op, off, std::min<std::uint64_t>(bulk_bytes_, op.bytes - off));
      ch.at_barrier = true;
      if (!pass_barrier(c)) return;
    }
    if (ch.pc == ops.size() && !ch.busy && !ch.at_barrier && !ch.posting && ch.done_ps == 0) {
      ch.done_ps = sim_.now();
      chan_done_first_ps_ = std::min(chan_done_first_ps_, ch.done_ps);
    }
    update_finish();
  }

  // The end-of-slice barrier (all threads, post warp included): once the post warp is free it
  // takes the finished slice: a send slice with writes outstanding is fenced
  // (__threadfence_system) before its tail flag; otherwise the flags go at once.
  bool pass_barrier(std::uint32_t c) {
    RingChan& ch = chans_[c];
    if (ch.posting) {
      stall(ch);
      return false;
    }
    ch.at_barrier = false;
    const SliceOp& op = ring_.channels[c][ch.pc];
    const std::uint8_t parity = send_parity(ch);
    if (prim_send(op.prim) && ch.unacked[parity]) {
      ch.posting = true;
      ch.post_pc = ch.pc;
      ch.post_parity = parity;
    } else {
      ring_post(c, ch.pc);
    }
    ++ch.pc;
    return true;
  }

  // Writes of the send slice begun last are counted (and acknowledged) under its parity: at most
  // two send slices have writes outstanding, the one being fenced and the one being copied.
  static std::uint8_t send_parity(const RingChan& ch) { return static_cast<std::uint8_t>((ch.send_started - 1) & 1); }

  void stall(RingChan& ch) {
    if (ch.stalled) return;
    ch.stalled = true;
    ch.stall_since = sim_.now();
  }

  // The post warp's fence completed: post the slice's flags, release the workers.
  void finish_post(std::uint32_t c) {
    RingChan& ch = chans_[c];
    ch.posting = false;
    if (ch.stalled) {
      fence_ps_ += sim_.now() - ch.stall_since;
      ch.stalled = false;
    }
    ring_post(c, ch.post_pc);
    if (ch.at_barrier) pass_barrier(c);
    ring_advance(c);
  }

  // Where a channel's time goes (summed over channels, in stats): waiting for the previous
  // rank's data (its tail flag), for a free slot at the next rank (its head flag), or for the
  // post warp to finish fencing an earlier slice (fence_ps).
  enum WaitKind : std::uint8_t { kNotWaiting = 0, kWaitData = 1, kWaitSlot = 2 };
  void begin_wait(RingChan& ch, WaitKind k) {
    if (ch.waiting == kNotWaiting) {
      ch.waiting = k;
      ch.since = sim_.now();
    }
  }
  void end_wait(RingChan& ch) {
    if (ch.waiting == kNotWaiting) return;
    (ch.waiting == kWaitData ? wait_data_ps_ : wait_slot_ps_) += sim_.now() - ch.since;
    ch.waiting = kNotWaiting;
  }

  // One step of a CTA copying a slice at collective.cta_bw_gbps: a send primitive issues its
  // next (bulk) packet, a receive-only primitive copies the slice to the output in one step.
  void cta_step(std::uint32_t c) {
    RingChan& ch = chans_[c];
    const SliceOp& op = ring_.channels[c][ch.pc];
    if (ch.issue_off >= op.bytes) {
      ch.busy = false;
      ch.at_barrier = true;
      if (pass_barrier(c)) ring_advance(c);
      return;
    }
    std::uint64_t b = op.bytes - ch.issue_off;
    if (prim_send(op.prim)) {
      if (egress_bound_ && egress_bytes_[c] >= egress_bound_) {  // the SM's store path is full
        ch.egress_blocked = true;
        ch.egress_since = sim_.now();
        return;
      }
      b = std::min<std::uint64_t>(bulk_bytes_, b);
      emit_data(c, op, ch.issue_off, b);
    }
    ch.issue_off += b;
    schedule(sim_.now() + serialization_ps(b, cta_rate(c, ch.pc, op.prim)), kCtaStep, 0, c);
  }

  // A primitive's CTA rate by its load/store shape: collective.cta_<shape>_gbps where set (> 0),
  // else collective.cta_bw_gbps. Shapes (loads/stores per element): copy 1/1 (send, recv),
  // copy_send 1/2 (copySend, recvCopySend), reduce 2/1 (recvReduceSend, recvReduceCopy),
  // reduce_send 2/2 (recvReduceCopySend).
  void init_prim_rates(const Params& p) {
    const double cta_bw = p.get_double("collective.cta_bw_gbps");
    if (cta_bw < 0) throw ConfigError("collective.cta_bw_gbps", "must be >= 0 (0: unlimited)");
    auto rate = [&](const char* key) {
      const double v = p.get_double(key);
      if (v < 0) throw ConfigError(key, "must be >= 0 (0: collective.cta_bw_gbps)");
      return v > 0 ? v : cta_bw;
    };
    const double copy = rate("collective.cta_copy_gbps"), copy_send = rate("collective.cta_copy_send_gbps");
    const double reduce = rate("collective.cta_reduce_gbps"), reduce_send = rate("collective.cta_reduce_send_gbps");
    auto set = [&](Prim pr, double v) { prim_rate_[static_cast<int>(pr)] = v; };
    set(Prim::kSend, copy);
    set(Prim::kRecv, copy);
    set(Prim::kCopySend, copy_send);
    set(Prim::kRecvCopySend, copy_send);
    set(Prim::kRecvReduceSend, reduce);
    set(Prim::kRecvReduceCopy, reduce);
    set(Prim::kRecvReduceCopySend, reduce_send);
  }

  // The slice's CTA rate: its primitive's rate, its time varied per (GPU, channel, slice) by a
  // seeded normal factor 1 + cv z (cv = collective.cta_jitter_cv, z truncated at 3 sigma). A
  // counter-based hash, not a generator, so the draw does not depend on event order.
  double cta_rate(std::uint32_t c, std::size_t slice, Prim prim) const {
    const double base = prim_rate_[static_cast<int>(prim)];
    if (jitter_cv_ <= 0) return base;
    const std::uint64_t k = mix64(seed_ ^ mix64((static_cast<std::uint64_t>(node_) << 48) ^ (static_cast<std::uint64_t>(c) << 32) ^ slice));
    const double u1 = (static_cast<double>(k >> 11) + 0.5) / 9007199254740992.0;
    const double u2 = static_cast<double>(mix64(k) >> 11) / 9007199254740992.0;
    double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
    z = std::max(-3.0, std::min(3.0, z));
    return base / (1.0 + jitter_cv_ * z);
  }

  void emit_data(std::uint32_t c, const SliceOp& op, std::uint64_t off, std::uint64_t b) {
    RingChan& ch = chans_[c];
    const std::uint64_t addr = (static_cast<std::uint64_t>(next_rank()) << 40) | (op.offset + off);
    const PacketHandle h =
        make(proto::PKT_WRITE, next_rank(), addr, b, wire_flits(b),
             make_tag(c, kData, prim_sends_final(op.prim), send_parity(ch)));
    if (functional_) {
      auto& v = sim_.packets()[h].values;
      for (std::uint64_t i = (op.offset + off) / kElemBytes; i < (op.offset + off + b) / kElemBytes; ++i)
        v.push_back(result_val(op.prim, i));
    }
    data_tx_bytes_ += b;
    egress_bytes_[c] += b;
    ++ch.unacked[send_parity(ch)];
    ++unacked_total_;
    enqueue(h, kReqVc);
  }

  void send_flag(std::uint32_t dst, std::uint32_t c, TagKind k, std::uint64_t seq) {
    const std::uint64_t addr = (static_cast<std::uint64_t>(dst) << 40) | kFlagSpace | (static_cast<std::uint64_t>(c) << 20) |
                               (static_cast<std::uint64_t>(k) << 16);
    const PacketHandle h = make(proto::PKT_WRITE, dst, addr, kFlagBytes, wire_flits(kFlagBytes), make_tag(c, k, false, seq));
    ++flags_tx_;
    ++unacked_total_;
    enqueue(h, kReqVc);
  }

  void ring_post(std::uint32_t c, std::size_t slice) {
    RingChan& ch = chans_[c];
    const SliceOp& op = ring_.channels[c][slice];
    if (prim_send(op.prim)) send_flag(next_rank(), c, kTail, ch.send_idx++);
    if (prim_recv(op.prim)) send_flag(prev_rank(), c, kHead, ch.recv_idx++);
  }

  static void mark(std::vector<std::uint8_t>& v, std::uint64_t& contig, std::uint64_t seq) {
    if (seq >= v.size() || v[seq]) throw InvariantError("collective: unexpected flag sequence number");
    v[seq] = 1;
    while (contig < v.size() && v[contig]) ++contig;
  }

  void on_write(PacketHandle h) {
    const Packet& p = sim_.packets()[h];
    const std::uint32_t c = tag_channel(p.tag);
    if (c >= chans_.size()) throw InvariantError(name() + ": write for unknown channel");
    switch (tag_kind(p.tag)) {
      case kData: {
        data_rx_bytes_ += p.payload_bytes;
        if (functional_) {
          auto& buf = tag_final(p.tag) ? ag_in_ : rs_in_;
          const std::uint64_t first = (p.addr & kOffsetMask) / kElemBytes;
          if (p.values.size() * kElemBytes != p.payload_bytes) throw InvariantError(name() + ": data packet without values");
          for (std::size_t k = 0; k < p.values.size(); ++k) buf[first + k] = p.values[k];
        }
        return;
      }
      case kTail: mark(chans_[c].tails, chans_[c].tail_contig, tag_seq(p.tag)); break;
      case kHead: mark(chans_[c].heads, chans_[c].head_contig, tag_seq(p.tag)); break;
    }
    ring_advance(c);
  }

  void on_write_ack(std::uint64_t tag) {
    --unacked_total_;
    if (tag_kind(tag) == kData) {
      const std::uint32_t c = tag_channel(tag);
      RingChan& ch = chans_[c];
      const auto parity = static_cast<std::uint8_t>(tag_seq(tag) & 1);
      if (ch.unacked[parity] == 0) throw InvariantError(name() + ": unexpected write ack");
      if (--ch.unacked[parity] == 0 && ch.posting && ch.post_parity == parity) finish_post(c);
    }
    update_finish();
  }

  // ------------------------------------------------------------------ NVLS
  void nvls_issue(std::uint32_t c) {
    NvlsChan& ch = nvls_chans_[c];
    const auto& ranges = nvls_[c];
    while (ch.ri < ranges.size() && ch.inflight < nvls_outstanding_) {
      const NvlsRange& r = ranges[ch.ri];
      const std::uint64_t b = std::min<std::uint64_t>(bulk_bytes_, r.bytes - ch.ro);
      const PacketHandle h = make(proto::PKT_MM_LD_REDUCE_REQ, node_, kMulticastSpace | (r.offset + ch.ro), 0,
                                  subpackets(b) * header_flits_, make_tag(c, kData, false, ++mm_seq_));
      Packet& p = sim_.packets()[h];
      p.aux = nranks_;                         // multicast group: GPUs [0, n)
      p.count = static_cast<std::uint32_t>(b);  // bytes to load
      ch.inflight += b;
      ch.ro += b;
      if (ch.ro == r.bytes) {
        ++ch.ri;
        ch.ro = 0;
      }
      enqueue(h, kReqVc);
    }
  }

  void on_ld_reduce_resp(PacketHandle in) {
    const std::uint64_t tag = sim_.packets()[in].tag;
    const std::uint32_t c = tag_channel(tag);
    if (c >= nvls_chans_.size()) throw InvariantError(name() + ": ld_reduce response for unknown channel");
    const std::uint64_t b = sim_.packets()[in].payload_bytes;
    nvls_chans_[c].inflight -= b;
    nvls_loads_done_ += b;
    const std::uint64_t off = sim_.packets()[in].addr & kOffsetMask;
    if (nvls_one_shot_) {
      if (functional_) store_values(off, sim_.packets()[in]);
    } else {
      // A multicast's tag must be unique while it is outstanding (the switch matches its acks).
      const PacketHandle h = make(proto::PKT_MM_ST, node_, kMulticastSpace | off, b, wire_flits(b),
                                  make_tag(c, kData, false, ++mm_seq_));
      Packet& s = sim_.packets()[h];
      s.aux = nranks_;
      if (functional_) s.values = sim_.packets()[in].values;
      enqueue(h, kReqVc);
    }
    nvls_issue(c);
    update_finish();
  }

  void store_values(std::uint64_t off, const Packet& p) {
    if (p.values.size() * kElemBytes != p.payload_bytes) throw InvariantError(name() + ": NVLS packet without values");
    const std::uint64_t first = off / kElemBytes;
    for (std::size_t k = 0; k < p.values.size(); ++k) out_vals_[first + k] = p.values[k];
  }

  void serve_read(PacketHandle in) {
    // The switch reads this GPU's copy of a multicast line (multimem.ld_reduce).
    const std::uint64_t b = sim_.packets()[in].count;
    const PacketHandle r = make(proto::PKT_READ_RESP, sim_.packets()[in].src, sim_.packets()[in].addr, b, wire_flits(b),
                                sim_.packets()[in].tag);
    const Packet& p = sim_.packets()[in];
    Packet& q = sim_.packets()[r];
    q.origin = p.origin;
    q.group = p.group;
    q.aux = p.aux;
    q.count = p.count;
    q.inject_ps = p.inject_ps;
    if (functional_) {
      const std::uint64_t first = (p.addr & kOffsetMask) / kElemBytes;
      for (std::uint64_t i = first; i < first + b / kElemBytes; ++i) q.values.push_back(input_value(node_, i));
    }
    reads_served_bytes_ += b;
    enqueue(r, resp_vc_);
  }

  // ------------------------------------------------------------------ arrivals
  // Note: allocating a packet may move the pool, so no Packet& is held across new_packet().
  void on_arrival(PacketHandle h) {
    const std::uint32_t port = sim_.packets()[h].hop_port;
    if (sim_.packets()[h].type == proto::PKT_CREDIT) {
      const Packet& p = sim_.packets()[h];
      out_[port].return_credits(p.vc, p.count);
      sim_.packets().release(h);
      pump(port);
      return;
    }
    in_[port].accept(sim_, h);
    in_[port].pop(sim_, *this, sim_.packets()[h].vc);  // the GPU sinks packets at line rate
    const PacketType type = sim_.packets()[h].type;
    switch (type) {
      case proto::PKT_WRITE: {
        const Packet& p = sim_.packets()[h];
        const std::uint32_t src = p.src;
        const std::uint64_t addr = p.addr, tag = p.tag;
        // One response flit per writes_per_response packets (subpackets() is >= 1).
        const std::uint32_t flits =
            (subpackets(p.payload_bytes) + writes_per_response_ - 1) / writes_per_response_ * header_flits_;
        on_write(h);
        enqueue(make(proto::PKT_WRITE_ACK, src, addr, 0, flits, tag), resp_vc_);
        break;
      }
      case proto::PKT_WRITE_ACK:
        ack_latency_ns_.add(static_cast<double>(sim_.now() - sim_.packets()[h].inject_ps) / 1000.0);
        on_write_ack(sim_.packets()[h].tag);
        break;
      case proto::PKT_READ_REQ: serve_read(h); break;
      case proto::PKT_MM_LD_REDUCE_RESP: on_ld_reduce_resp(h); break;
      case proto::PKT_MM_ST: {
        const Packet& p = sim_.packets()[h];
        mc_rx_bytes_ += p.payload_bytes;
        if (functional_) store_values(p.addr & kOffsetMask, p);
        if (member_acks_) {  // NVLS completion at memory: the member acks its copy
          const std::uint32_t src = p.src;
          const std::uint64_t addr = p.addr, tag = p.tag;
          const PacketHandle a = make(proto::PKT_MM_ACK, src, addr, 0, header_flits_, tag);
          enqueue(a, resp_vc_);
        }
        update_finish();
        break;
      }
      case proto::PKT_MM_ACK: break;
      default: throw InvariantError(name() + ": unexpected packet type " + proto::PacketType_Name(type));
    }
    sim_.packets().release(h);
  }

  void update_finish() {
    if (finished_) return;
    if (algo_ == CollAlgo::kRing) {
      if (unacked_total_ != 0) return;
      for (std::uint32_t c = 0; c < channels_; ++c)
        if (chans_[c].pc < ring_.channels[c].size() || chans_[c].posting || chans_[c].at_barrier) return;
    } else {
      if (nvls_loads_done_ != nvls_load_total_) return;
      if (!nvls_one_shot_ && mc_rx_bytes_ != bytes_) return;
    }
    finished_ = true;
    finish_ps_ = sim_.now();
    if (functional_) verify();
  }

  void verify() {
    std::uint64_t lo = 0, hi = space_bytes_ / kElemBytes;
    if (op_ == CollOp::kReduceScatter) {
      lo = node_ * shard_bytes_ / kElemBytes;
      hi = lo + shard_bytes_ / kElemBytes;
    }
    for (std::uint64_t i = lo; i < hi; ++i) {
      ++checked_;
      if (!(out_vals_[i] == expected(i))) ++errors_;
    }
  }

  std::uint32_t node_;
  CollOp op_ = CollOp::kAllReduce;
  CollAlgo algo_ = CollAlgo::kRing;
  bool nvls_one_shot_ = false, functional_ = false, finished_ = false, overlap_fence_ = true;
  std::uint64_t bytes_ = 0, space_bytes_ = 0, shard_bytes_ = 0, slots_ = 1;
  std::uint64_t packet_bytes_ = 128, bulk_bytes_ = 128, nvls_outstanding_ = 0;
  std::uint32_t channels_ = 1, nranks_ = 2, flit_bytes_ = 16, header_flits_ = 1;
  TimePs start_ps_ = 0, finish_ps_ = 0, chan_done_first_ps_ = kNever;
  double jitter_cv_ = 0;
  std::array<double, kPrimCount> prim_rate_{};  // GB/s per CTA, indexed by Prim
  std::uint64_t seed_ = 0;
  std::uint32_t writes_per_response_ = 1;
  std::uint32_t resp_vc_ = 1;
  std::array<std::uint32_t, 2> class_vcs_{1, 1};          // VCs per class: requests, responses
  std::vector<std::array<std::uint32_t, 2>> next_vc_;     // per port and class: round-robin offset
  bool member_acks_ = false;
  RingSchedule ring_;
  std::vector<RingChan> chans_;
  std::vector<std::vector<NvlsRange>> nvls_;
  std::vector<NvlsChan> nvls_chans_;
  std::uint64_t nvls_load_total_ = 0, nvls_loads_done_ = 0, mc_rx_bytes_ = 0, reads_served_bytes_ = 0;
  std::uint64_t unacked_total_ = 0, data_tx_bytes_ = 0, data_rx_bytes_ = 0, flags_tx_ = 0;
  std::uint64_t checked_ = 0, errors_ = 0, mm_seq_ = 0;
  std::uint64_t wait_data_ps_ = 0, wait_slot_ps_ = 0, fence_ps_ = 0, egress_wait_ps_ = 0;  // summed over channels
  Histogram ack_latency_ns_;
  std::vector<double> out_vals_, rs_in_, ag_in_;
  PlaneHash planes_;
  std::vector<OutputChannel> out_;
  std::vector<InputBuffer> in_;
  std::vector<std::array<std::deque<PacketHandle>, 2>> queues_;  // [port][1]: responses
  struct RequestQueues {
    std::vector<std::deque<PacketHandle>> by_chan;
    std::deque<std::uint32_t> groups;                // groups with packets waiting, in service order
    std::vector<std::deque<std::uint32_t>> members;  // per group: its channels with packets waiting
    std::vector<double> pass;                        // per group: service received / weight
    double vtime = 0;                                // pass of the group served last
  };
  std::vector<RequestQueues> req_;
  std::vector<std::uint64_t> egress_bytes_;  // per ring channel: data bytes waiting at the egress
  Egress egress_ = Egress::kFifo;
  std::uint32_t paired_ctas_ = 0;
  double paired_weight_ = 1.0;
  std::uint64_t egress_bound_ = 0;
};

const bool registered = [] {
  NodeFactory f;
  f.engine = "gpu";
  f.param_prefixes = {"collective."};
  f.build = [](Sim& sim, std::uint32_t node) { return std::make_unique<NcclCollectiveModel>(sim, node); };
  NodeRegistry::instance().add(proto::NODE_GPU, "collective", std::move(f));
  return true;
}();

}  // namespace
}  // namespace cais::net
