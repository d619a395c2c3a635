// The CAIS merge unit (HPCA'26 CAIS, III-A2..4 and III-B2), as switch feature "cais_merge".
//
// Tables. One merge table per switch port (the paper's 40 KB / 320 entries per port). A request
// belongs to the table of the port that leads to its home/owner GPU (`dst`; SwitchContext::port_toward), because that is the one
// place where every request for one address, from any input port, and the owner's response
// meet. Only the switch the home/owner GPU is attached to merges (SwitchContext::attached);
// in a multi-level fabric the other switches on the way forward CAIS requests untouched. Each table is a CAM keyed by (address, kind = load | reduction) plus a
// merging table; an entry costs one entry slot and its line's bytes (loads: the bytes asked
// for, `count` of the CAIS_LD_REQ; reductions: the payload), both bounded per table.
//
// Loads (CAIS_LD_REQ, aux = N, the GPUs that will request the line: the participants other
// than the owner, who holds it locally, i.e. P-1 when the owner is in the TB group; count =
// bytes asked for):
//   miss     allocate an entry in Load-Wait (count = 1), forward the request to the owner;
//   hit      Load-Wait: keep the requester for a deferred response; Load-Ready: answer at once
//            from the cached line; either way count += 1;
//   fill     the owner's CAIS_LD_RESP to the first requester (matched by requester and tag)
//            caches the line (Load-Ready), goes on to the first requester, and every deferred
//            requester gets its own copy;
//   release  when N distinct GPUs (= P-1) have requested and the line is there.
// Reductions (CAIS_RED, aux = N contributions to expect (P-1 when the home is in the group),
// count = contributions already merged in this packet, values in functional mode):
// contributions are summed in the entry; when N distinct GPUs are in, one CAIS_RED carrying the
// sum goes to the home GPU `dst` with count = contributions merged and the entry is released. A request with aux < 2 (or a
// packet already carrying all N) has nothing to merge and is forwarded untouched. A home GPU
// has an address complete when the counts it received add up to N.
// Requesters: an entry keeps a bitmask of the GPUs (src) that joined it and closes when N
// distinct GPUs are in, so that two thread blocks of one GPU (two requests or contributions
// from one src) cannot close a session early: a repeated load is answered like any other but
// does not count towards N, a repeated contribution is summed and counted in the written
// `count` but not towards N. A packet already carrying c > 1 contributions (merged elsewhere:
// its sources are unknown) counts as c distinct GPUs.
// Unlimited mode (unlimited = true): the table has no capacity bound (table_entries /
// table_bytes are ignored, slots and CAM grow as needed), nothing is evicted for space and
// nothing bypasses; timeouts still apply. high_water_entries / high_water_bytes then say how
// large a table each port would have needed.
// Eviction (a new entry does not fit): the least recently used entry of the table is the
// victim; a reduction victim is flushed (its partial sum goes to the home GPU with its
// count), a Load-Ready victim is dropped, and a Load-Wait victim cannot go before its data
// arrives: it is marked to be evicted on fill and the arriving request bypasses the unit (it
// is forwarded unmerged, allocating nothing, evicting nothing more). Requests of a dropped
// load entry simply miss later and fetch again.
// Timeout: every entry has a timer since its last access (request, hit or fill); when it runs
// out the entry is evicted by the same rules. A Load-Wait entry does not time out (its fill
// is an access and re-arms the timer). Timers are scheduled with SwitchContext::schedule_timer
// (one pending timer per entry, re-armed lazily when it fires early), never polled.
// Throttling (III-B2, "TB-aware request throttling"): per (TB group, GPU) the unit counts the
// live entries the GPU has joined that still wait for peers. When that count exceeds
// throttle_ahead_entries the GPU runs ahead of its peers in that group: it gets a THROTTLE
// (group, aux = throttle_hold_ns, how long to hold its mergeable requests at most). A hold
// that runs out while the GPU is still ahead is renewed at once if one of the peers it waits
// for (a GPU missing from an entry it joined) is free to catch up: it has asked in the group
// before (its block is on an SM) and is not held in it, or it has not (its block still needs
// an SM) and holds no hold of this unit at all. Otherwise the hold lapses, so that holds that
// wait on each other (a held block keeps its SM, which the peer's missing block may need)
// cannot chain, and it is sent again on the GPU's next join. When the count falls to
// throttle_resume_entries or below (its entries complete as peers catch up, or are evicted /
// time out) a hold still running is lifted with THROTTLE aux = 0. Every entry ends
// (completion, eviction or timeout) and every hold is bounded, so throttling cannot deadlock.
// Where its packets cross: the unit sits on the home's port (spec 3.3), so what it makes (an
// answer from the cached line, a merged sum, an ack, a throttle) enters the crossbar at its
// output's replication queue (SwitchContext::inject_at_output), as NVLS's copies do; it never
// takes the crossbar slot of the requester's input port, which carries that GPU's own traffic
// (there a late requester's answers capped its receive rate at its input's spare flits, so the
// GPU that asked first kept a faster receive rate and ran ahead). What it passes on (the one
// fetch, the owner's line to the first requester, a bypass) keeps the input it arrived on.
// Bulk packets (gpu.bulk_lines, cais/packet.h): an entry spans the request's lines (keyed by
// its first line; every GPU groups a tile's lines alike, and a request whose lines differ from
// its entry's is an error) and counts as that many entries against table_entries, in the
// throttle counts and in every statistic, so a table holds the same number of lines.
// Reduction acks (red_acks = net.cais_merge.outstanding_cap, spec 3.5 step 3.4): a GPU counts
// its red.cais lines as outstanding until this unit is done with them, so the unit answers
// every GPU-issued CAIS_RED it handles (aux >= 2, at the home's switch) with a 1-flit
// CAIS_RED_ACK to its src, count = the lines retired: when the entry holding it ends (complete
// sum written, partial sum evicted or timed out) each contributor gets one ack for all its
// lines in the entry (packets it sent x the entry's lines; a GPU that sent twice gets both),
// and a request that bypasses the table is acked as it is forwarded. Acks are responses: the
// control class of traffic control (vc_allocator.cc).
#pragma once
#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "cais/net/feature_util.h"
#include "cais/net/switch_feature.h"
#include "cais/stats.h"

namespace cais::net {

struct CaisMergeConfig {
  std::uint64_t table_bytes = 0;
  std::uint32_t table_entries = 0;
  TimePs timeout_ps = 0;
  TimePs lookup_delay_ps = 0;
  bool unlimited = false;
  bool throttle = false;
  std::uint32_t throttle_ahead_entries = 0;
  std::uint32_t throttle_resume_entries = 0;
  TimePs throttle_hold_ps = 0;
  bool red_acks = false;  // net.cais_merge.outstanding_cap
  PacketShape shape;
  // Reads net.cais_merge.* (and the router's net.flit_bytes / net.header_flits).
  static CaisMergeConfig from_params(const Params& p);
};

struct MergeTableStats {
  std::uint64_t hits = 0, misses = 0, evictions = 0, timeouts = 0, bypasses = 0;
  std::uint64_t deferred_evictions = 0;  // Load-Wait victims marked to go on fill
  std::uint64_t completions = 0;         // entries released complete (P-1 merged)
  std::uint64_t partial_flushes = 0;     // reduction sums written before P-1 (evict/timeout)
  std::uint64_t merged_writes = 0;       // CAIS_RED written to home GPUs by this table
  std::uint64_t bytes_saved = 0;         // payload bytes that crossed no GPU link thanks to merging
  std::uint64_t live_bytes = 0, live_entries = 0;
  std::uint64_t high_water_bytes = 0, high_water_entries = 0;
  Histogram wait_ns;  // per address: first to last request of an entry's life
  // The same waits in fixed bins: wait_bins[i] counts waits < kWaitBinEdgesNs[i] (and >= the
  // edge before); the last bin counts waits >= the last edge.
  static constexpr std::size_t kWaitBins = 14;
  static constexpr double kWaitBinEdgesNs[kWaitBins - 1] = {10,   20,   50,    100,   200,   500,   1000,
                                                             2000, 5000, 10000, 20000, 50000, 100000};
  std::uint64_t wait_bins[kWaitBins] = {};
  // The same split by kind (index: 0 loads, 1 reductions): which kind fills the table and waits.
  std::uint64_t kind_live_entries[2] = {}, kind_high_water_entries[2] = {};
  Histogram kind_wait_ns[2];
  // An entry's whole life, allocation to release: a load entry lives at least until its line
  // returns from the owner, however close its requests came. Little's law: mean entries =
  // entries per unit time x mean life, the time-mean below.
  Histogram kind_life_ns[2];
  double kind_entry_ps[2] = {};          // integral of live entries over time
  TimePs kind_changed_ps[2] = {};        // when kind_live_entries last changed
  TimePs kind_high_water_ps[2] = {};     // when kind_high_water_entries was reached
  void occupancy_change(std::size_t kind, TimePs now) {
    kind_entry_ps[kind] += static_cast<double>(kind_live_entries[kind]) * static_cast<double>(now - kind_changed_ps[kind]);
    kind_changed_ps[kind] = now;
  }
  void add_wait(double ns);
};

// GPUs that joined a merge entry: a bitmask over node ids, grown on first use of a high id and
// never shrunk (entries are reused, so no allocation once the largest id has been seen).
class RequesterSet {
 public:
  // True when `gpu` was not in the set yet.
  bool insert(std::uint32_t gpu) {
    const std::size_t w = gpu / 64;
    if (w >= words_.size()) words_.resize(w + 1, 0);
    const std::uint64_t bit = 1ull << (gpu % 64);
    if (words_[w] & bit) return false;
    words_[w] |= bit;
    return true;
  }
  bool contains(std::uint32_t gpu) const {
    const std::size_t w = gpu / 64;
    return w < words_.size() && (words_[w] >> (gpu % 64)) & 1;
  }
  void clear() { std::fill(words_.begin(), words_.end(), 0); }

 private:
  std::vector<std::uint64_t> words_;
};

class CaisMergeUnit : public SwitchFeature {
 public:
  CaisMergeUnit(const CaisMergeConfig& cfg, std::uint32_t num_ports, std::uint32_t feature_index,
                std::uint32_t switch_node);

  Verdict on_arrival(SwitchContext& ctx, std::uint32_t in_port, PacketHandle h) override;
  void on_timer(SwitchContext& ctx, std::uint64_t arg) override;
  void register_stats(StatsRegistry& reg, const std::string& prefix) const override;
  void check_drained() const override;
  bool idle() const override { return live_ == 0; }

  // ---- inspection
  std::uint32_t num_tables() const { return static_cast<std::uint32_t>(tables_.size()); }
  std::uint32_t table_of(std::uint32_t port) const;  // table of an output port
  const MergeTableStats& table_stats(std::uint32_t t) const { return tables_[t].st; }
  MergeTableStats totals() const;  // histogram not merged (left empty)
  std::size_t live_entries() const { return live_; }
  std::uint64_t throttles_sent() const { return throttles_sent_; }
  std::uint64_t red_acks_sent() const { return red_acks_sent_; }
  std::uint64_t red_ack_lines() const { return red_ack_lines_; }
  std::uint64_t unthrottles_sent() const { return unthrottles_sent_; }
  std::uint64_t holds_renewed() const { return holds_renewed_; }
  std::uint64_t holds_lapsed() const { return holds_lapsed_; }
  // Live entries GPU `gpu` has joined in `group` that wait for peers.
  std::uint32_t ahead(std::uint32_t group, std::uint32_t gpu) const;

 private:
  enum class State : std::uint8_t { kFree, kLoadWait, kLoadReady, kReduction };
  struct Waiter {
    std::uint32_t src = 0;
    std::uint64_t tag = 0;
    TimePs inject_ps = 0;
  };
  struct Contributor {
    std::uint32_t gpu = 0, packets = 0;
  };
  struct Entry {
    State state = State::kFree;
    bool timer_pending = false;
    bool evict_on_fill = false;
    std::uint32_t gen = 0;
    std::uint32_t table = 0;
    std::int32_t prev = -1, next = -1;  // LRU list of the table
    std::uint64_t addr = 0;
    std::uint32_t lines = 1;         // a bulk request's lines (line 0 at addr)
    std::array<std::uint64_t, kMaxBulkLines - 1> more_lines{};
    std::uint32_t home = 0;          // owner (loads) / home GPU (reductions) = request dst
    std::uint32_t expected = 0;      // requests / contributions to expect (aux)
    std::uint32_t count = 0;         // loads: requests merged; reductions: contributions
    std::uint32_t distinct = 0;      // GPUs counted towards `expected` (see RequesterSet)
    RequesterSet requesters;
    std::uint32_t packets = 0;       // request packets absorbed (bytes-saved accounting)
    std::uint32_t group = 0;
    std::uint32_t line_bytes = 0;    // bytes charged to the table
    std::uint32_t payload_bytes = 0; // data bytes (response / sum)
    std::uint32_t data_flits = 0;    // flits of the data packet (as its GPU sized it)
    std::uint32_t first_src = 0, data_src = 0;
    std::uint64_t first_tag = 0;
    TimePs first_inject_ps = 0;
    TimePs first_req_ps = 0, last_req_ps = 0, last_access_ps = 0;
    std::vector<Waiter> waiters;
    std::vector<double> values;
    std::vector<std::uint32_t> members;  // GPUs that joined (throttle accounting)
    std::vector<Contributor> contributors;  // GPU-issued reductions to ack (red_acks)
    std::int32_t group_prev = -1, group_next = -1;  // the group's entries that GPUs joined
  };
  struct Table {
    std::int32_t head = -1, tail = -1;  // head = least recently used
    MergeTableStats st;
  };
  enum class Kind : std::uint64_t { kLoad = 0, kReduction = 1 };

  Verdict on_load_req(SwitchContext& ctx, std::uint32_t in_port, PacketHandle h);
  Verdict on_load_resp(SwitchContext& ctx, std::uint32_t in_port, PacketHandle h);
  Verdict on_reduction(SwitchContext& ctx, std::uint32_t in_port, PacketHandle h);

  std::int32_t find(std::uint64_t addr, Kind k) const;
  // Make room for `bytes` in table t and allocate; -1 when the request must bypass.
  std::int32_t allocate(SwitchContext& ctx, std::uint32_t t, std::uint64_t addr, Kind k,
                        std::uint32_t bytes, std::uint32_t lines);
  // A request joining entry `e` must carry the entry's lines.
  void check_lines(SwitchContext& ctx, const Entry& e, const Packet& p) const;
  std::int32_t take_free_slot();  // unlimited mode grows the slots and the CAM
  // Count `src` (with `contributions` > 1: that many unknown GPUs) in the entry; true when it
  // is a GPU the entry had not seen.
  bool add_requester(Entry& e, std::uint32_t src, std::uint32_t contributions);
  void release(SwitchContext& ctx, std::int32_t idx);  // frees the slot (no packets sent)
  void evict(SwitchContext& ctx, std::int32_t idx, bool timeout);
  void flush_reduction(SwitchContext& ctx, std::int32_t idx, bool complete);
  void answer(SwitchContext& ctx, const Entry& e, const Waiter& w);
  void touch(std::int32_t idx);
  void unlink(std::int32_t idx);
  void arm_timer(SwitchContext& ctx, std::int32_t idx);
  void join(SwitchContext& ctx, Entry& e, std::uint32_t gpu);
  void leave_all(SwitchContext& ctx, Entry& e);
  void send_throttle(SwitchContext& ctx, std::uint32_t gpu, std::uint32_t group, bool on);
  void forward(SwitchContext& ctx, std::uint32_t in_port, PacketHandle h);
  void emit(SwitchContext& ctx, PacketHandle h);
  // red_acks: remember a GPU-issued reduction of `src` in the entry; ack every contributor.
  void add_contributor(Entry& e, const Packet& p);
  void ack_contributors(SwitchContext& ctx, Entry& e);
  void send_red_ack(SwitchContext& ctx, std::uint32_t gpu, std::uint32_t lines, std::uint64_t addr,
                    std::uint32_t group);

  CaisMergeConfig cfg_;
  std::uint32_t num_ports_, feature_index_, node_;
  std::vector<Table> tables_;
  std::vector<Entry> entries_;
  std::vector<std::int32_t> free_;
  // The CAM: open addressing with linear probing over a fixed power-of-two array (at least
  // four slots per entry), backward-shift deletion; no allocation after construction.
  struct CamSlot {
    std::uint64_t addr = 0;
    std::int32_t idx = -1;  // entry, -1 = empty
    std::uint32_t kind = 0;
  };
  std::vector<CamSlot> cam_;
  std::uint64_t cam_mask_ = 0;
  std::size_t cam_home(std::uint64_t addr, std::uint32_t kind) const {
    return static_cast<std::size_t>(mix64(addr + kind) & cam_mask_);
  }
  void cam_insert(std::uint64_t addr, std::uint32_t kind, std::int32_t idx);
  void cam_erase(std::uint64_t addr, std::uint32_t kind);
  void cam_resize(std::size_t slots);
  std::size_t live_ = 0;
  struct Ahead {
    std::uint32_t n = 0;
    bool throttled = false;
    TimePs until = 0;  // end of the hold last sent
  };
  std::unordered_map<PairKey, Ahead, PairKeyHash> ahead_;  // (group, gpu)
  // Timer args: an entry's timeout is (slot << 32) | generation (slot < 2^31); a hold's end
  // is kHoldTimer | (gpu << 32) | group.
  static constexpr std::uint64_t kHoldTimer = 1ull << 63;
  void hold(SwitchContext& ctx, Ahead& a, std::uint32_t group, std::uint32_t gpu);
  void hold_ran_out(SwitchContext& ctx, std::uint64_t arg);
  // Whether a GPU that `gpu` waits for in `group` (missing from a live entry it joined) is
  // free to catch up (see the header comment).
  bool waits_for_a_free_peer(SwitchContext& ctx, std::uint32_t group, std::uint32_t gpu) const;
  // Throttle bookkeeping, so that a hold's end looks at the group's entries and the peers' holds
  // only (not every slot and pair): the entries GPUs joined, per group (a list through
  // Entry::group_prev/next, head -1 when empty); the GPUs that have joined an entry of a group; each GPU's
  // throttled pairs (pointers into ahead_, whose nodes do not move).
  std::unordered_map<std::uint32_t, std::int32_t> group_head_;
  std::unordered_map<std::uint32_t, RequesterSet> asked_;
  std::vector<std::vector<const Ahead*>> throttled_of_gpu_;
  void group_link(std::int32_t idx);
  void group_unlink(std::int32_t idx);
  void set_throttled(Ahead& a, std::uint32_t gpu, bool on);
  bool held_anywhere(TimePs now, std::uint32_t gpu) const;
  std::uint64_t holds_renewed_ = 0, holds_lapsed_ = 0;
  std::uint64_t throttles_sent_ = 0, unthrottles_sent_ = 0;
  std::uint64_t red_acks_sent_ = 0, red_ack_lines_ = 0;
};

}  // namespace cais::net
