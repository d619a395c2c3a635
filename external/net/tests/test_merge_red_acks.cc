// The merge unit's CAIS_RED_ACKs (net.cais_merge.outstanding_cap, spec 3.5 step 3.4): every
// red.cais line a GPU sends is acked to that GPU exactly once, when the switch is done with it
// (merged sum written, partial sum evicted or timed out, or the request bypassed the table).
#include <gtest/gtest.h>

#include <map>

#include "cais/errors.h"
#include "cais/net/feature_cais_merge.h"
#include "test_feature_fake.h"

namespace cais::net {
namespace {

using testing::Delivered;
using testing::FakeSwitch;
using testing::feature_params;

constexpr TimePs kNs = 1000;

Params ack_params() {
  Params p = feature_params();
  p.set_bool("net.cais_merge.outstanding_cap", true);
  return p;
}

struct Rig {
  explicit Rig(Params p, std::uint32_t gpus = 8)
      : sw(gpus, true), unit(CaisMergeConfig::from_params(p), gpus, 0, sw.node_id()) {
    sw.add_feature(&unit);
  }
  // A GPU's red.cais of `lines` 128 B lines (addr, addr + 0x1000, ...) to home `dst`, N
  // contributions to expect (aux).
  void red(TimePs t, std::uint32_t src, std::uint32_t dst, std::uint64_t addr, std::uint32_t N,
           std::uint32_t lines = 1) {
    const PacketHandle h = sw.make(proto::PKT_CAIS_RED, src, dst, addr, N, 0);
    Packet& p = sw.packet(h);
    p.origin = src;
    p.lines = lines;
    for (std::uint32_t i = 1; i < lines; ++i) p.more_lines[i - 1] = addr + i * 0x1000;
    p.payload_bytes = 128 * lines;
    p.count = 1;
    p.values.assign(lines, 1.0);
    sw.arrive(t, h);
  }
  void ld(TimePs t, std::uint32_t src, std::uint32_t owner, std::uint64_t addr, std::uint32_t N) {
    const PacketHandle h = sw.make(proto::PKT_CAIS_LD_REQ, src, owner, addr, N, 1);
    sw.packet(h).origin = src;
    sw.packet(h).count = 128;
    sw.arrive(t, h);
  }
  // Acked lines per GPU, and the number of acks, of everything delivered so far.
  std::map<std::uint32_t, std::uint32_t> acked_lines() {
    std::map<std::uint32_t, std::uint32_t> out;
    for (const Delivered& d : sw.delivered)
      if (d.p.type == proto::PKT_CAIS_RED_ACK) {
        EXPECT_EQ(d.p.flits, 1u);          // a 1-flit control packet
        EXPECT_EQ(d.p.payload_bytes, 0u);
        EXPECT_EQ(d.p.src, sw.node_id());
        out[d.p.dst] += d.p.count;
      }
    return out;
  }
  std::size_t acks() const {
    std::size_t n = 0;
    for (const Delivered& d : sw.delivered) n += d.p.type == proto::PKT_CAIS_RED_ACK;
    return n;
  }
  FakeSwitch sw;
  CaisMergeUnit unit;
};

using Lines = std::map<std::uint32_t, std::uint32_t>;

TEST(CaisMergeRedAcks, MergedEntryAcksEachContributorOnceForAllItsLines) {
  Rig r(ack_params());
  r.red(0, 1, 0, 0xA00, 3);      // three GPUs' contributions to expect
  r.red(kNs, 1, 0, 0xA00, 3);    // a second thread block of GPU 1: summed, not a third GPU
  r.red(2 * kNs, 2, 0, 0xA00, 3);
  r.sw.run(10 * kNs);
  EXPECT_EQ(r.acks(), 0u);  // the entry still waits for GPU 3: nothing retired yet
  r.red(20 * kNs, 3, 0, 0xA00, 3);
  r.sw.run();
  EXPECT_EQ(r.acked_lines(), (Lines{{1, 2}, {2, 1}, {3, 1}}));
  EXPECT_EQ(r.acks(), 3u);  // one per contributor
  EXPECT_EQ(r.unit.red_acks_sent(), 3u);
  EXPECT_EQ(r.unit.red_ack_lines(), 4u);  // = the lines the GPUs sent
  EXPECT_EQ(r.unit.table_stats(0).completions, 1u);
  for (const Delivered& d : r.sw.delivered) {  // with the sum, not at a timeout
    if (d.p.type == proto::PKT_CAIS_RED_ACK) {
      EXPECT_EQ(d.t, 20 * kNs + 2 * kNs);
    }
  }
}

TEST(CaisMergeRedAcks, BulkEntryAcksEveryLineOfEachContributor) {
  Rig r(ack_params());
  r.red(0, 1, 0, 0x4000, 3, 4);
  r.red(kNs, 2, 0, 0x4000, 3, 4);
  r.red(2 * kNs, 5, 0, 0x4000, 3, 4);
  r.sw.run();
  EXPECT_EQ(r.acked_lines(), (Lines{{1, 4}, {2, 4}, {5, 4}}));
  EXPECT_EQ(r.acks(), 3u);
}

TEST(CaisMergeRedAcks, EvictedPartialSumAcksItsContributors) {
  Params p = ack_params();
  p.set_int("net.cais_merge.table_entries", 1);
  Rig r(p);
  r.red(0, 1, 0, 0xA00, 4);
  r.red(kNs, 2, 0, 0xA00, 4);
  r.sw.run(5 * kNs);
  EXPECT_EQ(r.acks(), 0u);
  r.red(10 * kNs, 3, 0, 0xB00, 4);  // table full: A's partial sum is flushed
  r.sw.run(20 * kNs);
  EXPECT_EQ(r.unit.table_stats(0).evictions, 1u);
  EXPECT_EQ(r.acked_lines(), (Lines{{1, 1}, {2, 1}}));
}

TEST(CaisMergeRedAcks, TimedOutPartialSumAcksItsContributors) {
  Params p = ack_params();
  p.set_double("net.cais_merge.timeout_ns", 1000);
  Rig r(p);
  r.red(0, 1, 0, 0xA00, 4);
  r.red(100 * kNs, 6, 0, 0xA00, 4);
  r.sw.run(1000 * kNs);
  EXPECT_EQ(r.acks(), 0u);  // 900 ns since the last access
  r.sw.run();
  EXPECT_EQ(r.unit.table_stats(0).timeouts, 1u);
  EXPECT_EQ(r.acked_lines(), (Lines{{1, 1}, {6, 1}}));
  for (const Delivered& d : r.sw.delivered) {
    if (d.p.type == proto::PKT_CAIS_RED_ACK) {  // expiry + lookup delay
      EXPECT_EQ(d.t, 1100 * kNs + 2 * kNs);
    }
  }
}

TEST(CaisMergeRedAcks, BypassedRequestIsAckedAsItIsForwarded) {
  Params p = ack_params();
  p.set_int("net.cais_merge.table_entries", 1);
  Rig r(p);
  r.ld(0, 1, 0, 0xA00, 3);           // Load-Wait: cannot be evicted before its data
  r.red(kNs, 2, 0, 0xC00, 3, 1);     // bypasses, forwarded unmerged
  r.sw.run(10 * kNs);
  EXPECT_EQ(r.unit.table_stats(0).bypasses, 1u);
  EXPECT_EQ(r.acked_lines(), (Lines{{2, 1}}));
  std::size_t reds = 0;
  for (const Delivered& d : r.sw.delivered) reds += d.p.type == proto::PKT_CAIS_RED && d.p.src == 2;
  EXPECT_EQ(reds, 1u);
}

TEST(CaisMergeRedAcks, NoAcksForWhatTheUnitDoesNotHandleOrWithTheCapOff) {
  {
    Rig r(ack_params());
    r.sw.attached_below = 4;
    r.red(0, 1, 0, 0xA00, 1);  // one contribution: nothing to merge (a red.remote looks the same)
    r.red(0, 1, 5, 0xB00, 3);  // home 5 hangs off another switch: acked there
    r.ld(0, 1, 2, 0xC00, 3);   // loads are answered, never acked
    r.sw.run();
    EXPECT_EQ(r.acks(), 0u);
  }
  {
    Rig r(feature_params());  // outstanding_cap off: red.cais is posted, no acks
    r.red(0, 1, 0, 0xA00, 2);
    r.red(kNs, 2, 0, 0xA00, 2);
    r.sw.run();
    EXPECT_EQ(r.unit.table_stats(0).completions, 1u);
    EXPECT_EQ(r.acks(), 0u);
  }
}

TEST(CaisMergeRedAcks, TheCapSizeIsRequired) {
  Params p = ack_params();
  p.set_double("net.cais_merge.outstanding_cap_kb", 0);
  EXPECT_THROW(CaisMergeConfig::from_params(p), ConfigError);
}

}  // namespace
}  // namespace cais::net
