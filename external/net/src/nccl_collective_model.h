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
//     data the CTA fences (__threadfence_system: waits for that slice's write responses) and
//     posts the tail flag (an 8 B write) to the next rank before it starts the next slice; the
//     next rank's CTA may consume the slice only once that flag has arrived (synchronisation
//     through the data itself), and after consuming it posts the head flag back, which frees one
//     of collective.buffer_slices buffer slots (NCCL_STEPS / SLICESTEPS) the sender may have in
//     flight.
//   * CTA throughput: with collective.cta_bw_gbps > 0 the CTA moves a slice at that rate (send
//     primitives issue their packets spaced accordingly; receive-only primitives copy the slice
//     to the output in that time), so a channel cannot send while it copies out, as in NCCL. A
//     GPU port sends the channels' requests in one FIFO, in issue order.
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
//
// One class in three files: this header; nccl_collective_model.cc (setup, the GPU port's egress,
// arrivals, the end-of-run checks); nccl_collective_ring.cc (the ring protocol);
// nccl_collective_nvls.cc (NVLS).
#pragma once

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


namespace cais::net::nccl_model {

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
  NcclCollectiveModel(Sim& sim, std::uint32_t node);
  void handle(const Event& e) override;
  bool done() const override { return finished_; }
  std::string blocked_reason() const override;
  void check_drained() const override;

 private:
  // A channel is one CTA copying slice pc. After a send slice it fences (waits for the slice's
  // write responses) and then posts the flags, and only then starts the next slice, so at most
  // one send slice has writes outstanding.
  struct RingChan {
    std::size_t pc = 0;         // slice the CTA is on
    bool busy = false;          // CTA copying slice pc
    bool posting = false;       // CTA fencing slice pc - 1
    bool stalled = false;       // next slice held by the fence since stall_since
    std::uint8_t waiting = 0;  // WaitKind
    TimePs since = 0, stall_since = 0;
    std::uint64_t issue_off = 0;
    std::uint64_t send_started = 0, recv_started = 0;  // slices begun (NCCL's worker step)
    std::uint64_t send_idx = 0, recv_idx = 0;          // flags posted
    std::uint64_t unacked = 0;                         // data writes unacknowledged
    std::vector<std::uint8_t> tails, heads;
    std::uint64_t tail_contig = 0, head_contig = 0;
    TimePs done_ps = 0;  // when the channel's last slice was posted
  };
  struct NvlsChan {
    std::size_t ri = 0;
    std::uint64_t ro = 0, inflight = 0;
  };

  void rng_weights(Sim& sim, const VcLayout& vcs);
  std::uint32_t wire_flits(std::uint64_t payload) const;
  std::uint32_t subpackets(std::uint64_t payload) const;
  std::uint32_t next_rank() const { return (node_ + 1) % nranks_; }
  std::uint32_t prev_rank() const { return (node_ + nranks_ - 1) % nranks_; }
  PacketHandle make(PacketType t, std::uint32_t dst, std::uint64_t addr, std::uint64_t payload,
                    std::uint32_t flits, std::uint64_t tag);

  void enqueue(PacketHandle h, std::uint32_t vc);
  void pump(std::uint32_t port);
  std::int32_t pick_vc(std::uint32_t port, std::uint32_t cls, std::uint32_t flits);

  // ------------------------------------------------------------------ functional values
  // Value the primitive sends / writes for element i (the reduce/gather buffers hold what
  // arrived from the previous rank).
  double recv_val(Prim prim, std::uint64_t i) const { return prim_reduce(prim) ? rs_in_[i] : ag_in_[i]; }
  double result_val(Prim prim, std::uint64_t i) const;
  double expected(std::uint64_t i) const;

  // ---------------------------------------------------- ring (nccl_collective_ring.cc)
  void ring_advance(std::uint32_t c);
  void end_slice(std::uint32_t c);
  void stall(RingChan& ch);
  void finish_post(std::uint32_t c);

  // Where a channel's time goes (summed over channels, in stats): waiting for the previous
  // rank's data (its tail flag), for a free slot at the next rank (its head flag), or for the
  // fence of the previous slice (fence_ps).
  enum WaitKind : std::uint8_t { kNotWaiting = 0, kWaitData = 1, kWaitSlot = 2 };
  void begin_wait(RingChan& ch, WaitKind k);
  void end_wait(RingChan& ch);
  void cta_step(std::uint32_t c);
  void init_prim_rates(const Params& p);
  void emit_data(std::uint32_t c, const SliceOp& op, std::uint64_t off, std::uint64_t b);
  void send_flag(std::uint32_t dst, std::uint32_t c, TagKind k, std::uint64_t seq);
  void ring_post(std::uint32_t c, std::size_t slice);
  static void mark(std::vector<std::uint8_t>& v, std::uint64_t& contig, std::uint64_t seq);
  void on_write(PacketHandle h);
  void on_write_ack(std::uint64_t tag);

  // ---------------------------------------------------- NVLS (nccl_collective_nvls.cc)
  void nvls_issue(std::uint32_t c);
  void on_ld_reduce_resp(PacketHandle in);
  void store_values(std::uint64_t off, const Packet& p);
  void serve_read(PacketHandle in);

  // ------------------------------------------------------------------ arrivals
  void on_arrival(PacketHandle h);
  void update_finish();
  void verify();

  std::uint32_t node_;
  CollOp op_ = CollOp::kAllReduce;
  CollAlgo algo_ = CollAlgo::kRing;
  bool functional_ = false, finished_ = false;
  std::uint64_t bytes_ = 0, space_bytes_ = 0, shard_bytes_ = 0, slots_ = 1;
  std::uint64_t packet_bytes_ = 128, bulk_bytes_ = 128, nvls_outstanding_ = 0;
  std::uint32_t channels_ = 1, nranks_ = 2, flit_bytes_ = 16, header_flits_ = 1;
  TimePs start_ps_ = 0, finish_ps_ = 0, chan_done_first_ps_ = kNever;
  std::array<double, kPrimCount> prim_rate_{};  // GB/s per CTA, indexed by Prim
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
  std::uint64_t wait_data_ps_ = 0, wait_slot_ps_ = 0, fence_ps_ = 0;  // summed over channels
  Histogram ack_latency_ns_;
  std::vector<double> out_vals_, rs_in_, ag_in_;
  PlaneHash planes_;
  std::vector<OutputChannel> out_;
  std::vector<InputBuffer> in_;
  std::vector<std::array<std::deque<PacketHandle>, 2>> queues_;  // [port][0]: requests, [1]: responses
};

}  // namespace cais::net::nccl_model
