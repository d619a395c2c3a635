// Remote-op packetizer of a Hopper GPU: a remote instruction (ld/st.remote, .cais, multimem,
// DMA pull, remote flag signal) becomes a RemoteOp on an issue queue (one per SM, plus the copy
// engine's), and its lines are cut into NVLink packets: each row of the tile is cut into 32 B
// sectors and the sectors of one gpu.max_packet_bytes line coalesce into one packet.
// An SM queue serves its resident blocks' ops round robin (issue_queue.h: each block's ops in
// program order, a turn of up to N lines, N = the bulk packet's lines), as the warps of
// resident blocks interleave their loads; the copy engine serves its ops in order. A queue
// keeps at most max_outstanding_per_sm (copy engine: dma_max_outstanding) requests in
// flight; posted reductions (red.cais) do not count, nor, with gpu.posted_stores, an SM's
// stores (st.remote, multimem.st/red): those are paced by credits instead. Before a store line is
// cut, its port must have credits for it beyond the store flits already waiting there
// (NvlinkPorts::post_room); otherwise the op sends its partial bulk packets and the queue waits
// in that port's FIFO until a credit returns (resume_posted), the other ops going on. A store op
// still completes on its acks, so a wait on it (a fence) waits for every ack. Responses complete
// packets, the last one completes the op and tells the block. Switch THROTTLE holds mergeable
// requests of a group: only that group's ops; the other ops of a queue take their turns.
// A store's data (st.remote, multimem.st/red, red.cais) leaves the SM through the SM's port, the
// one its local loads and stores use (local_memory.h), at the port's store rate: the op books all
// its bytes there when its first line may go (not held by a THROTTLE or the mergeable cap), as a
// warp's store instructions join the SM's memory pipeline when issued; each packet, sent, holds
// the queue's next store line until its bytes have crossed where that booking has them (a
// kSmPortFree event resumes the queue); its loads' requests go on meanwhile. (Booking packet by
// packet, each after the one before had crossed, let a copy stream's round-sized bookings on the
// same SM starve the remote stores.)
// Bulk packets (gpu.bulk_lines = N > 1): the lines cut off an op collect in that op's buffer per
// plane (the plane each line hashes to, as for single lines) and go out N at a time as one packet
// (fewer when the op ends or the line size changes), so the grouping depends only on the op's
// shape and every GPU groups one tile alike (the merge unit matches them); packets never mix
// ops. Lines count against the outstanding limit from the moment they are cut; N, and the
// number of ops a queue cuts at once, are capped so that the lines held back can never fill that
// limit alone, nor a bulk packet exceed a VC.
// Per-GPU cap on outstanding mergeable lines (cfg.mergeable_cap_lines > 0, spec 3.5 step 3.4):
// every line of an ld.cais / red.cais that a merge unit handles (aux >= 2) counts from the
// moment it is cut until its response (ld.cais) or the switch's CAIS_RED_ACK (red.cais; the op
// itself still completes when posted). An op that would take the count past the cap loses its
// turn and its queue waits in FIFO order; a response or ack resumes the waiting queues (no polling).
// With the cap, N and the ops cut at once are also capped so that the lines all SM queues hold
// back stay below it.
#pragma once
#include <array>
#include <cstdint>
#include <deque>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "cais/gpu/gpu_context.h"
#include "cais/gpu/issue_queue.h"
#include "cais/stats.h"

namespace cais::gpu {

struct Tb;

// Lines cut off one op for one plane, not yet sent (a bulk packet being filled).
struct BulkLines {
  std::uint32_t lines = 0, line_bytes = 0;
  std::array<std::uint64_t, kMaxBulkLines> addr{};
};

struct RemoteOp {
  std::uint32_t tb = 0, queue = 0;          // queue: SM index, or num_sms for the copy engine
  isa::Opcode op = isa::OP_UNSPECIFIED;
  proto::PacketType type = proto::PKT_UNSPECIFIED;
  std::uint64_t addr = 0, row_stride = 0;   // global address of row 0
  std::uint32_t rows = 0, row_bytes = 0, row = 0, col = 0;
  std::uint32_t peer = 0, aux = 0, group = 0, buffer = 0, elem_bytes = 2;
  std::uint64_t local_off = 0;              // DMA destination offset (heap)
  std::uint32_t pending = 0;                // packets issued, not complete
  bool all_issued = false, in_use = false, flag = false;
  double value = 0;
  // Functional tile registers: the register loaded or sent (0: none), the instruction's pc
  // (errors) and, for a store, the register's values taken at issue.
  std::uint32_t reg = 0, pc = 0;
  std::uint64_t fill_key = 0;  // a fetch for the remote read cache (0: none), filled on completion
  // A store's booking on the SM's port: when its last byte crosses, its bytes, those cut so far.
  TimePs port_end = 0;
  std::uint64_t port_total = 0, port_sent = 0;
  bool port_booked = false;
  std::vector<double> data;
  std::vector<BulkLines> bulk;  // per plane (bulk packets); kept when the slot is reused
};

class RemotePacketizer {
 public:
  explicit RemotePacketizer(GpuContext& ctx);
  // Queue instruction `ins` of block `tbi` on issue queue `queue` and start sending it.
  // `fill_key`: the op fetches that tile for the remote read cache (0: an ordinary op).
  void issue(std::uint32_t tbi, const isa::Instr& ins, std::uint32_t queue, std::uint64_t fill_key = 0);
  // A response (READ_RESP, CAIS_LD_RESP, MM_LD_REDUCE_RESP, WRITE_ACK, MM_ACK) for a request.
  void on_response(PacketHandle h);
  // One packet of op `oi` complete (its response, or on the wire for posted ones).
  void packet_done(std::uint32_t oi);
  // A block joined the fetch of remote-read-cache tile `fill_key` (RemoteReadCache::lookup):
  // a THROTTLE holding that fetch for its own group no longer holds it.
  void joined(std::uint64_t fill_key);
  // THROTTLE from switch `sw` for `group`: on for at most `hold_ps` (the packet's aux), or off.
  void throttle(std::uint32_t sw, std::uint32_t group, bool on, TimePs hold_ps);
  // kThrottleExpiry: the hold of (switch << 32) | group ran out, unless renewed since.
  void hold_expired(std::uint64_t key);
  // CAIS_RED_ACK: the switch is done with `lines` of this GPU's red.cais lines.
  void on_red_ack(std::uint32_t lines);
  // Credits came back on `port`: pump the queues whose stores wait for it, oldest first.
  void resume_posted(std::uint32_t port);
  bool waits_for_post_room(std::uint32_t port) const { return !post_waiters_.empty() && !post_waiters_[port].empty(); }
  std::uint64_t& post_credit_stalls() { return post_credit_stalls_; }
  // Lines per bulk packet of the SMs' queues, gpu.bulk_lines as capped (0: no SM sent a line).
  std::uint32_t sm_bulk_lines() const { return bulk_cap_[0]; }
  std::uint64_t mergeable_outstanding() const { return mergeable_; }
  std::size_t cap_waiting() const { return cap_waiters_.size(); }
  std::uint64_t& cap_stalls() { return cap_stalls_; }
  std::uint64_t& mergeable_high_water() { return mergeable_high_water_; }
  std::uint64_t& red_ack_lines() { return red_ack_lines_; }

  std::uint32_t live() const { return live_; }
  std::uint64_t& outstanding_stalls() { return outstanding_stalls_; }
  std::uint64_t& throttle_stalls() { return throttle_stalls_; }
  std::uint64_t& throttle_bypasses() { return throttle_bypasses_; }
  std::uint64_t& throttles() { return throttles_; }
  std::uint64_t& retagged_fetches() { return retagged_fetches_; }
  std::uint64_t& sm_port_stalls() { return sm_port_stalls_; }
  // SM `sm`'s port has carried the stores it booked: resume its queue (kSmPortFree).
  void sm_port_free(std::uint32_t sm) {
    if (ctx_.now() != sm_port_wake_at_[sm]) return;  // superseded by an earlier wake, already served
    sm_port_wake_at_[sm] = 0;
    pump(sm);
  }
  Histogram& latency_ns() { return latency_ns_; }

 private:
  // Why an op cannot cut its next line now.
  enum class Blocked : std::uint8_t { kNo, kHeld, kCap, kLimit, kPostRoom, kSmPort };
  // Hand out queue q's free line slots, turn by turn, until no op can go.
  void pump(std::uint32_t q);
  // Whether op oi of queue qi can cut its next line; registers the wake-up if not.
  Blocked blocked(std::uint32_t qi, std::uint32_t oi);
  // Cut op oi's next line and send it (or add it to its bulk packet).
  void cut_line(std::uint32_t qi, std::uint32_t oi);
  std::uint32_t limit(std::uint32_t qi) const {
    return qi == ctx_.cfg.num_sms ? ctx_.cfg.dma_max_outstanding : ctx_.cfg.max_outstanding_per_sm;
  }
  // Whether a THROTTLE holds op's next line: a mergeable op (ld.cais, red.cais; not a plain
  // red.remote) of a group a switch throttles, unless it is a shared fetch whose own block's or
  // a joiner's group no switch throttles: it then goes on under that group (remote_issue.cc).
  bool hold(RemoteOp& op);
  void lift(std::uint64_t key);  // end the hold of (switch << 32) | group
  // A line of `op` counts against the per-GPU cap of mergeable lines.
  bool counts_toward_cap(const RemoteOp& op) const { return ctx_.cfg.mergeable_cap_lines && merged_in_switch(op); }
  // A .cais request of several participants, which the switch's merge unit merges line by line.
  static bool merged_in_switch(const RemoteOp& op) {
    return (op.op == isa::LD_CAIS || op.op == isa::RED_CAIS) && op.aux >= 2;
  }
  void retire_mergeable(std::uint64_t lines);  // a response or ack: count down, resume waiters
  // An SM's store that is posted (gpu.posted_stores): it holds no outstanding slot.
  bool posted_store(const RemoteOp& op) const {
    return ctx_.cfg.posted_stores && sends_sm_data(op) && op.type != proto::PKT_CAIS_RED;
  }
  // Data an SM sends through its port: its stores and red.cais (not a flag, not the copy
  // engine's DMA).
  bool sends_sm_data(const RemoteOp& op) const {
    return op.queue < ctx_.cfg.num_sms && !op.flag &&
           (op.type == proto::PKT_WRITE || op.type == proto::PKT_MM_ST || op.type == proto::PKT_MM_RED ||
            op.type == proto::PKT_CAIS_RED);
  }
  // The port of `op`'s next line: the plane of its first byte's sector.
  std::uint32_t next_line_port(const RemoteOp& op) const;
  // Cut the next line off `op`: its first sector's address and its bytes (sectors x 32).
  // whole: the op's bytes cover the line entirely (no other op's row can share it).
  void next_packet(RemoteOp& op, std::uint64_t& addr, std::uint32_t& bytes, bool& whole);
  // Add a cut line to op oi's bulk packet of its plane; sends it when full.
  void add_line(std::uint32_t qi, std::uint32_t oi, std::uint64_t addr, std::uint32_t bytes, bool whole);
  void send_bulk(std::uint32_t oi, std::uint32_t plane);
  void send_all_bulk(std::uint32_t oi);
  // N for queue qi (the configured N, capped); the first call also sets the queues' open limits.
  std::uint32_t bulk_lines(std::uint32_t qi);
  void emit(RemoteOp& op, std::uint32_t oi, const std::uint64_t* addrs, std::uint32_t lines, std::uint32_t bytes);
  // Functional register ops: take the register (load) or its values (store) at issue; the
  // register element of each element of a packet (an error if the packet holds bytes outside
  // the tile); a load response's values placed into the register.
  void bind_register(RemoteOp& op, const Tb& tb);
  void packet_elements(const RemoteOp& op, const Packet& p, std::uint32_t bytes, std::vector<std::uint32_t>& out) const;
  void place_response(const RemoteOp& op, const Packet& p);

  GpuContext& ctx_;
  std::vector<IssueQueue> queues_;
  std::vector<RemoteOp> ops_;
  std::uint32_t planes_ = 0, bulk_cap_[2] = {0, 0};  // N for SM queues / the copy engine (0: not set)
  std::vector<std::uint32_t> free_ops_;
  std::uint32_t live_ = 0;
  std::uint64_t tag_seq_ = 0;
  std::vector<std::uint32_t> elems_;  // scratch of packet_elements
  std::vector<double> elem_scratch_;  // one line's values (bulk DMA)
  std::unordered_map<std::uint64_t, TimePs> throttle_until_;         // (switch << 32) | group -> hold end
  std::unordered_map<std::uint32_t, std::uint32_t> throttled_groups_;  // group -> switches
  std::unordered_map<std::uint64_t, std::uint32_t> held_fetches_;     // fill key of a held fetch -> its queue
  std::uint64_t outstanding_stalls_ = 0, throttle_stalls_ = 0, throttles_ = 0;
  std::uint64_t throttle_bypasses_ = 0;  // turns taken past a held op of the same queue
  std::uint64_t retagged_fetches_ = 0;   // held fetches that went on under a joiner's group
  std::uint64_t mergeable_ = 0, mergeable_high_water_ = 0, cap_stalls_ = 0, red_ack_lines_ = 0;
  std::deque<std::uint32_t> cap_waiters_;  // queues stalled on the cap, in stall order
  std::vector<std::uint8_t> cap_waiting_;  // per queue: in cap_waiters_
  std::vector<std::deque<std::uint32_t>> post_waiters_;  // per port: queues waiting for its credits
  std::vector<std::uint8_t> post_waiting_;                // per (queue, port): in that port's FIFO
  std::uint32_t line_flits_ = 0;                          // flits of a full max_packet_bytes line
  std::uint64_t post_credit_stalls_ = 0;
  std::vector<TimePs> sm_port_free_at_;  // per SM: when the last store packet's bytes have crossed
  std::vector<TimePs> sm_port_wake_at_;  // per SM: the kSmPortFree its queue waits for (0: none)
  std::uint64_t sm_port_stalls_ = 0;
  Histogram latency_ns_;
};

}  // namespace cais::gpu
