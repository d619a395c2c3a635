// Unit tests of NVLS (multicast, ld_reduce, ack aggregation, DMA mode) and the group-sync table.
#include <gtest/gtest.h>

#include <map>

#include "cais/errors.h"
#include "cais/net/feature_group_sync.h"
#include "cais/net/feature_nvls.h"
#include "test_feature_fake.h"

namespace cais::net {
namespace {

using testing::Delivered;
using testing::FakeSwitch;
using testing::feature_params;

constexpr TimePs kNs = 1000;

Params nvls_params(bool member_acks) {
  Params p = feature_params();
  p.set_bool("net.nvls.member_acks", member_acks);
  return p;
}

struct NvlsRig {
  explicit NvlsRig(bool member_acks = true)
      : sw(8, true), nvls(NvlsConfig::from_params(nvls_params(member_acks)), sw.node_id()) {
    sw.add_feature(&nvls);
  }
  FakeSwitch sw;
  Nvls nvls;
};

TEST(Nvls, MulticastStoreReachesEveryMemberAndAcksOnce) {
  NvlsRig r;
  const PacketHandle h = r.sw.make(proto::PKT_MM_ST, 2, 2, 0x4000, 8, 77);
  r.sw.packet(h).payload_bytes = 128;
  r.sw.packet(h).flits = 9;
  r.sw.packet(h).values = {1, 2};
  r.sw.arrive(0, h);
  r.sw.run();
  auto d = r.sw.take();
  ASSERT_EQ(d.size(), 8u);
  std::map<std::uint32_t, int> per_dst;
  for (const auto& x : d) {
    EXPECT_EQ(x.p.type, proto::PKT_MM_ST);
    EXPECT_EQ(x.p.src, 2u);
    EXPECT_EQ(x.p.tag, 77u);
    EXPECT_EQ(x.p.payload_bytes, 128u);
    EXPECT_EQ(x.p.flits, 9u);
    EXPECT_EQ(x.p.values, (std::vector<double>{1, 2}));
    EXPECT_EQ(x.t, 2 * kNs);
    ++per_dst[x.p.dst];
  }
  EXPECT_EQ(per_dst.size(), 8u);
  EXPECT_FALSE(r.nvls.idle());
  for (std::uint32_t m = 0; m < 8; ++m) {
    const PacketHandle a = r.sw.make(proto::PKT_MM_ACK, m, 2, 0x4000, 0, 77);
    r.sw.arrive(10 * kNs + m, a, m);
  }
  r.sw.run(10 * kNs + 6);
  EXPECT_TRUE(r.sw.take().empty());  // members' acks are absorbed
  r.sw.run();
  d = r.sw.take();
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].p.type, proto::PKT_MM_ACK);
  EXPECT_EQ(d[0].p.dst, 2u);
  EXPECT_EQ(d[0].p.count, 8u);
  EXPECT_EQ(d[0].p.tag, 77u);
  EXPECT_TRUE(r.nvls.idle());
  EXPECT_NO_THROW(r.nvls.check_drained());
  EXPECT_EQ(r.nvls.copies(), 8u);
  EXPECT_EQ(r.nvls.acks_sent(), 1u);
}

TEST(Nvls, WithoutMemberAcksTheSwitchAcksAtReplication) {
  NvlsRig r(false);
  const PacketHandle h = r.sw.make(proto::PKT_MM_ST, 1, 1, 0x4000, 8, 5);
  r.sw.arrive(0, h);
  r.sw.run();
  const auto d = r.sw.take();
  ASSERT_EQ(d.size(), 9u);
  int acks = 0;
  for (const auto& x : d)
    if (x.p.type == proto::PKT_MM_ACK) {
      ++acks;
      EXPECT_EQ(x.p.dst, 1u);
      EXPECT_EQ(x.p.count, 8u);
    }
  EXPECT_EQ(acks, 1);
  EXPECT_TRUE(r.nvls.idle());
  EXPECT_NO_THROW(r.nvls.check_drained());
}

TEST(Nvls, MulticastReductionToASubgroup) {
  NvlsRig r;
  const PacketHandle h = r.sw.make(proto::PKT_MM_RED, 5, 5, 0x4000, 4, 1);
  r.sw.packet(h).values = {3};
  r.sw.arrive(0, h);
  r.sw.run();
  const auto d = r.sw.take();
  ASSERT_EQ(d.size(), 4u);
  for (std::uint32_t i = 0; i < 4; ++i) {
    EXPECT_EQ(d[i].p.type, proto::PKT_MM_RED);
    EXPECT_EQ(d[i].p.dst, 4 + i);
    EXPECT_EQ(d[i].p.values, (std::vector<double>{3}));
  }
  EXPECT_THROW(r.nvls.check_drained(), InvariantError);  // acks still missing
}

TEST(Nvls, LdReduceReadsEveryMemberAndAnswersTheSum) {
  NvlsRig r;
  const PacketHandle h = r.sw.make(proto::PKT_MM_LD_REDUCE_REQ, 3, 3, 0x8000, 8, 9);
  r.sw.packet(h).count = 128;
  r.sw.arrive(0, h);
  r.sw.run();
  auto d = r.sw.take();
  ASSERT_EQ(d.size(), 8u);
  std::vector<double> expect(4, 0.0);
  for (const auto& x : d) {
    EXPECT_EQ(x.p.type, proto::PKT_READ_REQ);
    EXPECT_EQ(x.p.aux, 128u);
    EXPECT_TRUE(x.p.tag & kSwitchTagBit);
    EXPECT_EQ(x.p.src, 3u);
    const PacketHandle resp = r.sw.make(proto::PKT_READ_RESP, x.p.dst, x.p.src, x.p.addr, 0, x.p.tag);
    Packet& q = r.sw.packet(resp);
    q.payload_bytes = 128;
    for (int e = 0; e < 4; ++e) {
      q.values.push_back(0.25 * (x.p.dst + 1) * (e + 1));
      expect[e] += q.values.back();
    }
    r.sw.arrive(5 * kNs + x.p.dst, resp, x.p.dst);
  }
  // An unrelated read response passes through.
  r.sw.arrive(6 * kNs, r.sw.make(proto::PKT_READ_RESP, 1, 2, 0x9000, 0, 5), 1);
  r.sw.run();
  d = r.sw.take();
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[1].p.type, proto::PKT_MM_LD_REDUCE_RESP);
  EXPECT_EQ(d[1].p.dst, 3u);
  EXPECT_EQ(d[1].p.tag, 9u);
  EXPECT_EQ(d[1].p.count, 8u);
  EXPECT_EQ(d[1].p.payload_bytes, 128u);
  EXPECT_EQ(d[1].p.values, expect);
  EXPECT_EQ(d[1].t, 5 * kNs + 7 + 4 * kNs);  // last response + reduction delay
  EXPECT_NO_THROW(r.nvls.check_drained());
}

TEST(Nvls, DmaMulticastReduceAndUnicast) {
  NvlsRig r;
  const PacketHandle h = r.sw.make(proto::PKT_DMA, 0, 0, 0x100, dma_aux(DmaOp::kMulticastReduce, 8), 4);
  r.sw.packet(h).payload_bytes = 512;
  r.sw.arrive(0, h);
  r.sw.arrive(0, r.sw.make(proto::PKT_DMA, 1, 6, 0x200, dma_aux(DmaOp::kUnicast, 0), 5));
  r.sw.run();
  const auto d = r.sw.take();
  ASSERT_EQ(d.size(), 9u);
  int copies = 0;
  for (const auto& x : d)
    if (dma_op(x.p.aux) == DmaOp::kReduceCopy) ++copies;
  EXPECT_EQ(copies, 8);
  EXPECT_EQ(r.sw.forwarded, 1u);
  for (std::uint32_t m = 0; m < 8; ++m) r.sw.arrive(kNs, r.sw.make(proto::PKT_MM_ACK, m, 0, 0x100, 0, 4), m);
  r.sw.run();
  ASSERT_EQ(r.sw.take().size(), 1u);
  EXPECT_NO_THROW(r.nvls.check_drained());
}

TEST(Nvls, BadGroupsFailLoudly) {
  NvlsRig r;
  r.sw.arrive(0, r.sw.make(proto::PKT_MM_ST, 2, 2, 0x4000, 16, 1));  // 16 members, 8 GPUs
  EXPECT_THROW(r.sw.run(), InvariantError);
}

// ------------------------------------------------------------------ group sync

struct SyncRig {
  SyncRig() : sw(8, false), sync(GroupSyncConfig::from_params(feature_params()), sw.node_id()) {
    sw.add_feature(&sync);
  }
  void req(TimePs t, std::uint32_t src, std::uint32_t group, std::uint32_t members, std::uint64_t tag) {
    const PacketHandle h = sw.make(proto::PKT_SYNC_REQ, src, sw.node_id(), 0, members, tag);
    sw.packet(h).group = group;
    sw.arrive(t, h);
  }
  FakeSwitch sw;
  GroupSync sync;
};

TEST(GroupSync, ReleasesEveryRegisteredGpuWhenAllArrived) {
  SyncRig r;
  for (std::uint32_t g = 0; g < 3; ++g) r.req(g * kNs, g, 42, 4, 100 + g);
  r.req(0, 5, 43, 2, 7);  // another group, incomplete
  r.sw.run();
  EXPECT_TRUE(r.sw.take().empty());
  r.req(10 * kNs, 3, 42, 4, 103);
  r.sw.run();
  const auto d = r.sw.take();
  ASSERT_EQ(d.size(), 4u);
  EXPECT_EQ(r.sw.injected_at_outputs, 4u);  // at their outputs, not the registrants' inputs
  for (std::uint32_t g = 0; g < 4; ++g) {
    EXPECT_EQ(d[g].p.type, proto::PKT_SYNC_RELEASE);
    EXPECT_EQ(d[g].p.dst, g);
    EXPECT_EQ(d[g].p.group, 42u);
    EXPECT_EQ(d[g].p.tag, 100u + g);
    EXPECT_EQ(d[g].t, 12 * kNs);
  }
  EXPECT_EQ(r.sync.groups_released(), 1u);
  EXPECT_THROW(r.sync.check_drained(), InvariantError);  // group 43 still waits
  r.req(20 * kNs, 6, 43, 2, 8);
  r.req(30 * kNs, 1, 42, 4, 200);  // group id reused after its release
  r.sw.run();
  EXPECT_EQ(r.sw.take().size(), 2u);
  EXPECT_EQ(r.sync.pending_groups(), 1u);
}

TEST(GroupSync, RequestsForAnotherSwitchPassThrough) {
  SyncRig r;
  const PacketHandle h = r.sw.make(proto::PKT_SYNC_REQ, 0, r.sw.node_id() + 1, 0, 2, 0);
  r.sw.packet(h).group = 9;
  r.sw.arrive(0, h);
  r.sw.run();
  EXPECT_EQ(r.sw.forwarded, 1u);
  EXPECT_EQ(r.sync.requests(), 0u);
}

TEST(GroupSync, MismatchedMemberCountFailsLoudly) {
  SyncRig r;
  r.req(0, 0, 1, 4, 0);
  r.req(kNs, 1, 1, 3, 0);
  EXPECT_THROW(r.sw.run(), InvariantError);
}

}  // namespace
}  // namespace cais::net
