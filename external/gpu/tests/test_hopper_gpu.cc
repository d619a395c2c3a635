// Unit tests of the Hopper GPU model: instruction timing and effects, memory traffic, NVLink
// packets per sector pattern, and the fields of .cais / multimem / sync requests (the probe
// switch of hopper_test_util.h records what a GPU sends).
#include <gtest/gtest.h>

#include <algorithm>

#include "hopper_test_util.h"

namespace cais::gpu {
namespace {
using namespace cais::gpu::test;
// ---------------------------------------------------------------- tests
TEST(Hopper, MmaTimeIsFlopsOverTensorRate) {
  auto wl = one_kernel();
  auto* m = add(wl, isa::MMA);
  m->set_m(128);
  m->set_n(128);
  m->set_k(64);
  m->set_dtype(isa::BF16);
  auto r = run(wl);
  // 2*128*128*64 FLOP at 4096 FLOP/cycle, 1 GHz = 512 ns; + launch 1000 ns + block 10 ns.
  EXPECT_DOUBLE_EQ(r.stats["gpu0.finish_time"], (1000 + 10 + 512) * 1000.0);
  EXPECT_EQ(r.stats["gpu0.mma_flops"], 2.0 * 128 * 128 * 64);
  EXPECT_EQ(r.stats["gpu0.tbs_completed"], 1);
}

TEST(Hopper, TwoBlocksShareOneSmTensorCore) {
  auto wl = one_kernel(1, 2);
  auto* m = add(wl, isa::MMA);
  m->set_m(128);
  m->set_n(128);
  m->set_k(64);
  proto::Configure c;  // one SM: both blocks reside on it and share its tensor cores
  auto r = [&] {
    seen().clear();
    RunResult x;
    x.m = std::make_unique<HostedModel>();
    auto cfg = make_config(wl, 1, false);
    (*cfg.mutable_params())["gpu.num_sms"].set_i(1);
    x.m->configure(cfg);
    x.m->sim().run_until(kNever);
    return x.m->sim().now();
  }();
  EXPECT_EQ(r, (1000 + 10 + 2 * 512) * 1000ull);
}

TEST(Hopper, LoopsRunTheirTripCountAndWavesFollowOccupancy) {
  auto wl = one_kernel(1, 8);
  wl.mutable_kernels(0)->set_smem_bytes(200 * 1024);  // one block per SM
  add(wl, isa::LOOP)->set_count(3);
  add_mma(wl, 128, 128, 64);
  add(wl, isa::ENDLOOP);
  auto r = run(wl);  // 4 SMs, 8 blocks -> 2 waves of (10 + 3*512) ns
  EXPECT_DOUBLE_EQ(r.stats["gpu0.finish_time"], (1000 + 2 * (10 + 3 * 512)) * 1000.0);
  EXPECT_EQ(r.stats["gpu0.mma_flops"], 8 * 3 * 2.0 * 128 * 128 * 64);
}

TEST(Hopper, KernelsReportTheSmTimeTheirBlocksHeld) {
  // 8 blocks of 200 KiB shared memory (the largest share: 200 of 228 KiB) on 4 SMs, each
  // resident for its start overhead and 3 MMAs: SM time = 8 x 1546 ns x 200 / 228.
  auto wl = one_kernel(1, 8);
  wl.mutable_kernels(0)->set_smem_bytes(200 * 1024);
  add(wl, isa::LOOP)->set_count(3);
  add_mma(wl, 128, 128, 64);
  add(wl, isa::ENDLOOP);
  auto r = run(wl);
  EXPECT_NEAR(r.stats["gpu0.kernel0.k.sm_us"], 8 * (10 + 3 * 512) / 1000.0 * 200.0 / 228.0, 1e-9);
  EXPECT_EQ(r.stats["gpu0.kernel0.k.sync_wait_sm_us"], 0.0);
  // a one-warp block without registers or shared memory holds one of the 32 block slots
  auto one = one_kernel(1, 4);  // one block on each of the 4 SMs
  one.mutable_kernels(0)->set_threads_per_block(32);
  one.mutable_kernels(0)->set_regs_per_thread(0);
  add_mma(one, 128, 128, 64);
  r = run(one);
  const double busy_us = (r.stats["gpu0.finish_time"] / 1000.0 - 1000.0) / 1000.0;
  EXPECT_GT(busy_us, 0.0);
  EXPECT_NEAR(r.stats["gpu0.kernel0.k.sm_us"], 4 * busy_us / 32.0, 1e-9);
}

TEST(Hopper, LocalLoadMissGoesToHbmThenHitsInL2) {
  auto wl = one_kernel();
  mem(wl, isa::LD, 4, 256, 1024);
  mem(wl, isa::LD, 4, 256, 1024);  // same tile: L2 hit
  auto r = run(wl);
  EXPECT_EQ(r.stats["gpu0.local.ld_bytes"], 2 * 1024);
  EXPECT_EQ(r.stats["gpu0.local.hbm_read_bytes"], 1024);
  EXPECT_EQ(r.stats["gpu0.local.l2_tile_hits"], 1);
  // miss: max(L2 1024 ps, HBM 2048 ps) + 400 ns + 100 ns; hit: 1024 ps + 100 ns
  const double t = 1010e3 + (2048 + 500e3) + (1024 + 100e3);
  EXPECT_NEAR(r.stats["gpu0.finish_time"], t, 2048);
}

TEST(Hopper, StoresWriteValuesAndLoadsReadThem) {
  auto wl = one_kernel(1, 1, true);
  auto* st = mem(wl, isa::ST, 2, 64, 128, 256);
  st->set_value(3);
  mem(wl, isa::LD, 2, 64, 128, 256);
  auto r = run(wl);
  EXPECT_EQ(r.stats["gpu0.local.st_bytes"], 128);
  EXPECT_DOUBLE_EQ(r.stats["gpu0.ld_value_sum"], 3.0 * 32);  // 32 fp32 elements
  EXPECT_DOUBLE_EQ(r.gpu(0).mem_value(0, 64), 3.0);          // byte 256 = element 64
  EXPECT_DOUBLE_EQ(r.gpu(0).mem_value(0, 64 + 16), 0.0);     // gap between rows untouched
  EXPECT_DOUBLE_EQ(r.gpu(0).mem_value(0, 64 + 32), 3.0);     // second row at +128 B
}

// Packets per sector pattern: ld.remote rows x row_bytes at a stride, to peer 1.
struct Pattern {
  std::uint32_t rows, row_bytes;
  std::uint64_t stride;
  std::int64_t base;
  std::uint32_t packets, bytes;
};
class RemotePattern : public ::testing::TestWithParam<Pattern> {};

TEST_P(RemotePattern, SectorsCoalesceIntoPacketsOfOneLine) {
  const Pattern pt = GetParam();
  auto wl = one_kernel(2);
  wl.mutable_launches(0)->add_gpus(0);
  mem(wl, isa::LD_REMOTE, pt.rows, pt.row_bytes, pt.stride, pt.base, 1);
  auto r = run(wl, 2, true);
  EXPECT_EQ(r.stats["gpu0.tx.READ_REQ.packets"], pt.packets);
  EXPECT_EQ(r.stats["gpu0.rx.READ_RESP.bytes"], pt.bytes);
  std::uint64_t sum = 0;
  for (const auto& s : seen()) {
    EXPECT_EQ(s.type, proto::PKT_READ_REQ);
    EXPECT_EQ(s.dst, 1u);
    EXPECT_EQ(s.addr >> kOwnerShift, 1u);  // peer's address space
    EXPECT_EQ(s.addr % 32, 0u);            // sector aligned
    EXPECT_LE(s.aux, 128u);
    sum += s.aux;
  }
  EXPECT_EQ(sum, pt.bytes);
}

INSTANTIATE_TEST_SUITE_P(
    Patterns, RemotePattern,
    ::testing::Values(Pattern{1, 512, 0, 0, 4, 512},           // contiguous: 4 full lines
                      Pattern{4, 64, 4096, 0, 4, 256},         // 4 rows of 2 sectors
                      Pattern{1, 100, 0, 16, 1, 128},          // [16,116): sectors 0..3, one line
                      Pattern{1, 128, 0, 96, 2, 128},          // [96,224): 1 sector + 3 sectors
                      Pattern{8, 8, 32, 0, 2, 256},            // 8 rows of 8 B, 32 B apart: 4 sectors per line
                      Pattern{2, 256, 1024, 64, 6, 512}));     // 2 x [64,320): 64 + 128 + 64 B

// gpu.cache_remote_reads: 4 blocks on 4 SMs load the same 512 B tile from GPU 1 twice. The
// first block fetches it (4 lines), the other 3 join that fetch, and the second loads hit L2.
// Without the .nc mark (or with the cache off) every load goes to the peer.
TEST(Hopper, ReadOnlyRemoteTilesAreFetchedOncePerLaunchAndThenHitL2) {
  const auto run_with = [](bool cache, bool read_only) {
    cache_remote_reads() = cache;
    auto wl = one_kernel(2, 4);
    wl.mutable_launches(0)->add_gpus(0);
    for (int i = 0; i < 2; ++i) mem(wl, isa::LD_REMOTE, 1, 512, 0, 0, 1)->set_read_only(read_only);
    auto r = run(wl, 2, true);
    cache_remote_reads() = false;
    return r;
  };
  auto r = run_with(true, true);
  EXPECT_EQ(r.stats["gpu0.tx.READ_REQ.packets"], 4);
  EXPECT_EQ(r.stats["gpu0.remote_reads.fetches"], 1);
  EXPECT_EQ(r.stats["gpu0.remote_reads.joined"], 3);
  EXPECT_EQ(r.stats["gpu0.remote_reads.l2_hits"], 4);
  EXPECT_EQ(r.stats["gpu0.local.l2_tile_hits"], 4);
  const double cached_end = r.stats["gpu0.finish_time"];
  for (auto [cache, read_only] : {std::pair{true, false}, std::pair{false, true}}) {
    r = run_with(cache, read_only);
    EXPECT_EQ(r.stats["gpu0.tx.READ_REQ.packets"], 4 * 4 * 2);
    EXPECT_GT(r.stats["gpu0.finish_time"], cached_end);
  }
}

TEST(Hopper, RemoteStoreWritesPeerMemoryAndIsAcked) {
  auto wl = one_kernel(2, 1, true);
  wl.mutable_launches(0)->add_gpus(0);
  auto* st = mem(wl, isa::ST_REMOTE, 1, 256, 0, 0, 1);
  st->set_value(5);
  auto r = run(wl, 2, true);
  EXPECT_EQ(r.stats["gpu0.tx.WRITE.packets"], 2);
  EXPECT_EQ(r.stats["gpu0.tx.WRITE.bytes"], 256);
  EXPECT_EQ(r.stats["gpu0.rx.WRITE_ACK.packets"], 2);
  ASSERT_EQ(seen().size(), 2u);
  EXPECT_EQ(seen()[0].values.size(), 32u);  // 128 B of fp32
  EXPECT_DOUBLE_EQ(seen()[0].values[0], 5.0);
}

TEST(Hopper, CaisLoadCarriesGroupParticipantsAndOwner) {
  auto wl = one_kernel(4, 3);
  auto* k = wl.mutable_kernels(0);
  k->mutable_cais()->set_enabled(true);
  k->mutable_cais()->set_num_gpus(4);
  k->mutable_cais()->set_group_base(100);
  k->mutable_cais()->set_pre_launch_sync(true);
  k->mutable_cais()->set_pre_access_sync(true);
  add(wl, isa::CAIS_SYNC);
  auto* ld = mem(wl, isa::LD_CAIS, 1, 128, 0, 0, 2);  // every GPU loads from GPU 2
  ld->mutable_addr()->set_block_x(128);
  auto r = run(wl, 4, true);
  std::uint32_t ld_reqs = 0, sync = 0;
  for (const auto& s : seen()) {
    if (s.type == proto::PKT_CAIS_LD_REQ) {
      ++ld_reqs;
      EXPECT_EQ(s.dst, 2u);
      EXPECT_EQ(s.aux, 3u);  // 4 GPUs, the owner reads locally
      EXPECT_EQ(s.count, 128u);
      EXPECT_GE(s.group, 100u);
      EXPECT_LT(s.group, 103u);
      EXPECT_EQ(s.addr, unicast_addr(2, (s.group - 100) * 128));  // GPU-invariant: same address from all
    } else if (s.type == proto::PKT_SYNC_REQ) {
      ++sync;
      EXPECT_EQ(s.aux, 4u);
    }
  }
  EXPECT_EQ(ld_reqs, 3u * 3);        // GPUs 0, 1, 3 x 3 blocks; GPU 2 is local
  EXPECT_EQ(sync, 4u * 3 * 2);       // pre-launch + pre-access, every block on every GPU
  EXPECT_EQ(r.stats["gpu2.tx.CAIS_LD_REQ.packets"], 0);
  EXPECT_EQ(r.stats["gpu0.sync_requests"], 6);
}

TEST(Hopper, ThrottleHoldsMergeableRequestsOfItsGroupUntilLifted) {
  auto wl = one_kernel(2, 1);
  wl.mutable_launches(0)->add_gpus(0);
  mem(wl, isa::LD_CAIS, 512, 128, 1024, 0, 1);  // 512 requests of group 0, 64 in flight at most
  probe_throttles() = true;
  auto r = run(wl, 2, true);
  probe_throttles() = false;
  EXPECT_EQ(r.stats["gpu0.throttle_packets"], 2);  // on, then off
  EXPECT_GT(r.stats["gpu0.stall.throttled"], 0);
  EXPECT_EQ(r.stats["gpu0.rx.CAIS_LD_RESP.packets"], 512);
  EXPECT_GT(r.stats["gpu0.finish_time"], 5e6);  // held until the throttle was lifted after 5 us
}

// Two blocks (two TB groups) on one SM, each ld.cais-ing 512 lines, while the probe throttles
// block 0's group for 5 us; `params` adds engine parameters. seen() holds the packets sent.
std::map<std::string, double> run_two_groups_on_one_sm_throttled(const std::map<std::string, std::int64_t>& params) {
  auto wl = one_kernel(2, 2);
  wl.mutable_launches(0)->add_gpus(0);
  mem(wl, isa::LD_CAIS, 512, 128, 128, 0, 1)->mutable_addr()->set_block_x(65536);
  probe_throttles() = true;
  seen().clear();
  proto::Configure c = make_config(wl, 2, true);
  (*c.mutable_params())["gpu.num_sms"].set_i(1);
  for (const auto& [key, value] : params) (*c.mutable_params())[key].set_i(value);
  HostedModel m;
  auto st = run_config(m, c);
  probe_throttles() = false;
  return st;
}

TEST(Hopper, ThrottleHoldsOnlyItsGroupsBlockNotTheOthersOnTheSameSm) {
  // Block 1's ld.cais, sharing the SM's issue queue with the held block 0, takes every turn
  // meanwhile (spec 3.5 step 3: the synchroniser stalls G's TB).
  auto st = run_two_groups_on_one_sm_throttled({});
  std::size_t last[2] = {0, 0};
  for (std::size_t i = 0; i < seen().size(); ++i)
    if (seen()[i].type == proto::PKT_CAIS_LD_REQ) last[(seen()[i].addr - unicast_addr(1, 0)) / 65536] = i;
  EXPECT_GT(st["gpu0.stall.throttled"] + st["gpu0.throttle_bypasses"], 0);
  EXPECT_GT(st["gpu0.throttle_bypasses"], 0);
  EXPECT_LT(last[1], last[0]);  // block 1 done before the held block 0 resumed
  EXPECT_EQ(st["gpu0.rx.CAIS_LD_RESP.packets"], 1024);
}

// `blocks` blocks (one TB group each) ld.cais the same 64 KiB from GPU 1 through the remote read
// cache, so block 0 fetches and the others join its fetch; with `throttle` the probe throttles
// block 0's group (with `every_group` each group at its first request) and lifts each hold after
// 5 us. Block b first reads delay_rows x b rows of local memory (rows_in_bounds), so the later
// blocks join later. seen() holds the packets sent.
std::map<std::string, double> run_shared_fetch(std::uint32_t blocks, bool throttle, std::uint32_t delay_rows = 0,
                                               bool every_group = false) {
  auto wl = one_kernel(2, blocks);
  wl.mutable_launches(0)->add_gpus(0);
  if (delay_rows) mem(wl, isa::LD, delay_rows, 512, 512)->mutable_rows_in_bounds()->set_block_x(delay_rows);
  mem(wl, isa::LD_CAIS, 512, 128, 128, 0, 1);
  cache_remote_reads() = true;
  probe_throttles() = throttle;
  probe_throttles_every_group() = every_group;
  seen().clear();
  auto r = run(wl, 2, true);
  probe_throttles() = probe_throttles_every_group() = false;
  cache_remote_reads() = false;
  return r.stats;
}

// The TB groups of GPU 0's CAIS_LD_REQs in seen(), in the order they first appear.
std::vector<std::uint32_t> load_request_groups() {
  std::vector<std::uint32_t> groups;
  for (const auto& x : seen())
    if (x.type == proto::PKT_CAIS_LD_REQ && x.src == 0 && std::find(groups.begin(), groups.end(), x.group) == groups.end())
      groups.push_back(x.group);
  return groups;
}

TEST(Hopper, ThrottleDoesNotHoldAFetchThatBlocksOfOtherGroupsJoined) {
  // Block 1 joins block 0's fetch: the shared fetch serves block 1's group too and goes on as if
  // never throttled, while the same load with no joiner is held.
  auto shared = run_shared_fetch(2, true), alone = run_shared_fetch(1, true);
  EXPECT_EQ(shared["gpu0.remote_reads.joined"], 1);
  EXPECT_EQ(shared["gpu0.rx.CAIS_LD_RESP.packets"], 512);  // one fetch for both blocks
  EXPECT_EQ(shared["gpu0.throttle_packets"], 2);           // held, then lifted
  EXPECT_EQ(shared["gpu0.stall.throttled"], 0);
  // The throttle's two flits on the link are all it costs.
  EXPECT_NEAR(shared["gpu0.finish_time"], run_shared_fetch(2, false)["gpu0.finish_time"], 1e3);
  EXPECT_GT(alone["gpu0.stall.throttled"], 0);
  EXPECT_GT(alone["gpu0.finish_time"], run_shared_fetch(1, false)["gpu0.finish_time"] + 3e6);
}

TEST(Hopper, AHeldFetchGoesOnWhenABlockOfAnotherGroupJoinsIt) {
  // Block 1 joins block 0's fetch only after the probe's THROTTLE has held it: the fetch then
  // goes on at once, long before the probe lifts the hold at 5 us.
  auto shared = run_shared_fetch(2, true, 1024), alone = run_shared_fetch(1, true, 1024);
  EXPECT_EQ(shared["gpu0.remote_reads.joined"], 1);
  EXPECT_GT(shared["gpu0.stall.throttled"], 0);  // held before block 1 joined
  EXPECT_GT(alone["gpu0.finish_time"], 5e6);     // no joiner: held until the lift
  EXPECT_LT(shared["gpu0.finish_time"], alone["gpu0.finish_time"] - 2e6);  // equal without the wake-up
}

TEST(Hopper, AThrottledFetchGoesOnUnderTheGroupOfTheBlockThatJoinedIt) {
  // Block 0's request would not have left its SM, so block 1's own would have gone out: the
  // fetch's remaining lines carry block 1's group, which the switch then counts.
  auto st = run_shared_fetch(2, true);
  const auto groups = load_request_groups();
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_NE(groups[0], groups[1]);
  EXPECT_EQ(st["gpu0.throttle_retagged_fetches"], 1);
  EXPECT_EQ(st["gpu0.rx.CAIS_LD_RESP.packets"], 512);
  EXPECT_EQ(run_shared_fetch(2, false)["gpu0.throttle_retagged_fetches"], 0);
}

TEST(Hopper, ARowsGroupsAreThrottledOneByOneAndTheFetchHeldWhenAllAre) {
  // Every group throttled at its first request: the fetch of three blocks goes on under block
  // 1's group, then block 2's, is held once all three are throttled, and goes on under block
  // 0's own group when its hold is lifted (5 us after the first THROTTLE). Never holding a
  // joined fetch would end it as early as no throttling does.
  auto st = run_shared_fetch(3, true, 0, true);
  EXPECT_EQ(load_request_groups().size(), 3u);
  EXPECT_EQ(st["gpu0.throttle_retagged_fetches"], 3);  // to 1, to 2, back to 0
  EXPECT_GT(st["gpu0.stall.throttled"], 0);
  EXPECT_EQ(st["gpu0.rx.CAIS_LD_RESP.packets"], 512);
  EXPECT_GT(st["gpu0.finish_time"], run_shared_fetch(3, false)["gpu0.finish_time"] + 1.5e6);
}

TEST(Hopper, ThrottleNeverSendsAHeldOpsBulkPacketShort) {
  // With bulk packets the held op's lines already collected wait for the rest of their packet
  // (every GPU groups a tile's lines alike; a short packet would not match the merge entry).
  // The outstanding limit of 62 lines stops a packet of 4 half full.
  auto st = run_two_groups_on_one_sm_throttled({{"gpu.bulk_lines", 4}, {"gpu.max_outstanding_per_sm", 62}});
  std::size_t reqs = 0;
  for (const auto& x : seen())
    if (x.type == proto::PKT_CAIS_LD_REQ) {
      ++reqs;
      EXPECT_EQ(x.count, 4u * 128);  // whole packets of 4 lines only
    }
  EXPECT_EQ(reqs, 2u * 512 / 4);
  EXPECT_GE(st["gpu0.throttle_packets"], 1);
  EXPECT_GT(st["gpu0.stall.throttled"] + st["gpu0.throttle_bypasses"], 0);  // the hold did bind
}

TEST(Hopper, ThrottleHoldRunsOutWithoutALift) {
  // The merge unit sends no lift for a hold that has run out (feature_cais_merge_throttle.cc):
  // the GPU must resume by itself after the THROTTLE's aux ns, else it stays held forever.
  auto wl = one_kernel(2, 1);
  wl.mutable_launches(0)->add_gpus(0);
  mem(wl, isa::LD_CAIS, 512, 128, 1024, 0, 1);
  probe_throttles() = true;
  probe_lifts() = false;
  probe_throttle_hold_ns() = 3000;
  auto r = run(wl, 2, true);
  probe_lifts() = true;
  probe_throttle_hold_ns() = 10000;
  EXPECT_EQ(r.stats["gpu0.throttle_packets"], 1);  // on only
  EXPECT_GT(r.stats["gpu0.stall.throttled"], 0);
  EXPECT_EQ(r.stats["gpu0.rx.CAIS_LD_RESP.packets"], 512);
  probe_throttles() = true;
  auto lifted = run(wl, 2, true);  // the same hold lifted by the switch after 5 us
  probe_throttles() = false;
  auto free = run(wl, 2, true);    // never throttled
  EXPECT_GT(r.stats["gpu0.finish_time"], free.stats["gpu0.finish_time"] + 1.5e6);  // held (3 us, in-flight overlap)
  EXPECT_LT(r.stats["gpu0.finish_time"], lifted.stats["gpu0.finish_time"] - 1.5e6);  // not the 5 us
}

TEST(Hopper, RedCaisAndMultimemCarryTheRightTypeAndAddress) {
  auto wl = one_kernel(2, 1, true);
  wl.mutable_launches(0)->add_gpus(0);
  auto* red = mem(wl, isa::RED_CAIS, 1, 128, 0, 64, 1);
  red->set_value(2);
  auto* mst = mem(wl, isa::MM_ST, 1, 64, 0, 128, 0);
  mst->set_buffer(1);
  auto* mred = mem(wl, isa::MM_RED, 1, 32, 0, 0, 0);
  mred->set_buffer(1);
  auto* mld = mem(wl, isa::MM_LD_REDUCE, 1, 128, 0, 0, 0);
  mld->set_buffer(1);
  auto r = run(wl, 2, true);
  const std::uint64_t mc_base = 1 << 20;  // MC follows X (1 MB, 4 KB aligned)
  ASSERT_EQ(seen().size(), 5u);
  // red.cais [64,192) crosses a line: two packets of 64 B, posted, one contribution each.
  EXPECT_EQ(seen()[0].type, proto::PKT_CAIS_RED);
  EXPECT_EQ(seen()[0].addr, unicast_addr(1, 64));
  EXPECT_EQ(seen()[0].payload, 64u);
  EXPECT_EQ(seen()[0].aux, 1u);  // 2 GPUs, the home GPU 1 does not send to itself
  EXPECT_EQ(seen()[0].count, 1u);
  EXPECT_DOUBLE_EQ(seen()[0].values.at(0), 2.0);
  EXPECT_EQ(seen()[1].type, proto::PKT_CAIS_RED);
  EXPECT_EQ(seen()[1].addr, unicast_addr(1, 128));
  EXPECT_EQ(seen()[2].type, proto::PKT_MM_ST);
  EXPECT_EQ(seen()[2].addr, kMulticastBit | (mc_base + 128));
  EXPECT_EQ(seen()[2].payload, 64u);
  EXPECT_EQ(seen()[2].aux, 2u);  // NVLS group: the workload's GPUs
  EXPECT_EQ(seen()[3].type, proto::PKT_MM_RED);
  EXPECT_EQ(seen()[3].payload, 32u);
  EXPECT_EQ(seen()[4].type, proto::PKT_MM_LD_REDUCE_REQ);
  EXPECT_EQ(seen()[4].payload, 0u);
  EXPECT_EQ(seen()[4].count, 128u);
  EXPECT_EQ(r.stats["gpu0.tx.CAIS_RED.bytes"], 128);
  EXPECT_EQ(r.stats["gpu0.rx.MM_LD_REDUCE_RESP.bytes"], 128);
  EXPECT_EQ(r.stats["gpu0.rx.MM_ACK.packets"], 2);  // multimem stores complete on the switch's ack
}

TEST(Hopper, ArrivingReductionsAndMulticastStoresUpdateMemory) {
  // GPU 1 sends red.cais to GPU 0 over a direct link (no switch): GPU 0 accumulates.
  auto wl = one_kernel(2, 1, true);
  wl.mutable_launches(0)->add_gpus(1);
  auto* red = mem(wl, isa::RED_CAIS, 1, 128, 0, 0, 0);
  red->set_value(7);
  auto* red2 = mem(wl, isa::RED_CAIS, 1, 128, 0, 0, 0);
  red2->set_value(1);
  add(wl, isa::BAR);
  proto::Configure c = make_config(wl, 2, false);
  for (auto* n : {c.mutable_topology()->mutable_nodes(0), c.mutable_topology()->mutable_nodes(1)}) n->set_num_ports(1);
  for (int dir = 0; dir < 2; ++dir) {
    auto* l = c.mutable_topology()->add_links();
    l->set_src_node(dir);
    l->set_dst_node(1 - dir);
    l->set_bw_gbps(100);
    l->set_latency_ps(100000);
    l->set_lanes(1);
  }
  HostedModel m;
  m.configure(c);
  m.sim().run_until(kNever);
  ASSERT_TRUE(m.done()) << m.blocked_reason();
  const auto& g0 = *dynamic_cast<const HopperGpu*>(m.nodes()[0].get());
  for (int e = 0; e < 32; ++e) EXPECT_DOUBLE_EQ(g0.mem_value(0, e), 8.0);
  EXPECT_DOUBLE_EQ(g0.mem_value(0, 32), 0.0);
}

// Two GPUs joined by a direct link (no switch): packets to the peer go straight to it.
proto::Configure direct_pair(const isa::Workload& wl) {
  proto::Configure c = make_config(wl, 2, false);
  for (auto* n : {c.mutable_topology()->mutable_nodes(0), c.mutable_topology()->mutable_nodes(1)}) n->set_num_ports(1);
  for (int dir = 0; dir < 2; ++dir) {
    auto* l = c.mutable_topology()->add_links();
    l->set_src_node(dir);
    l->set_dst_node(1 - dir);
    l->set_bw_gbps(100);
    l->set_latency_ps(100000);
    l->set_lanes(1);
  }
  return c;
}

TEST(Hopper, RemoteFlagThenDmaPullCopiesThePeersData) {
  // GPU 1: store 4.0 into X[0..1024) then signal GPU 0's flag (MC buffer offset 0... use X at
  // 64 KB as the flag word). GPU 0: wait for the flag, DMA-copy X[0..1024) of GPU 1 into its
  // own X[4096..5120), then load it.
  auto wl = one_kernel(2, 1, true);
  wl.mutable_launches(0)->add_gpus(1);
  auto* st = mem(wl, isa::ST, 1, 1024, 0, 0);
  st->set_value(4);
  add(wl, isa::BAR);
  auto* sig = add(wl, isa::FLAG_SIGNAL);
  sig->set_scope(isa::REMOTE);
  sig->mutable_peer()->set_base(0);
  sig->mutable_addr()->set_base(65536);
  sig->set_value(1);
  auto* k2 = wl.add_kernels();
  k2->set_name("puller");
  k2->set_grid_x(1);
  k2->set_grid_y(1);
  k2->set_threads_per_block(128);
  auto* w = k2->add_program();
  w->set_op(isa::FLAG_WAIT);
  w->mutable_addr()->set_base(65536);
  w->set_value(1);
  auto* d = k2->add_program();
  d->set_op(isa::DMA_COPY);
  d->set_rows(1);
  d->set_row_bytes(1024);
  d->mutable_addr()->set_base(4096);
  d->mutable_src_addr()->set_base(0);
  d->mutable_peer()->set_base(1);
  auto* ld = k2->add_program();
  ld->set_op(isa::LD);
  ld->set_rows(1);
  ld->set_row_bytes(1024);
  ld->mutable_addr()->set_base(4096);
  auto* la = wl.add_launches();
  la->set_kernel(1);
  la->set_stream(1);
  la->add_gpus(0);
  HostedModel m;
  m.configure(direct_pair(wl));
  m.sim().run_until(kNever);
  ASSERT_TRUE(m.done()) << m.blocked_reason();
  m.check_drained();
  const auto& g0 = *dynamic_cast<const HopperGpu*>(m.nodes()[0].get());
  EXPECT_EQ(g0.flag_value(0, 65536), 1u);
  for (int e = 1024; e < 1280; ++e) EXPECT_DOUBLE_EQ(g0.mem_value(0, e), 4.0) << e;
  EXPECT_DOUBLE_EQ(g0.mem_value(0, 1280), 0.0);
  proto::Stats stats;
  m.export_stats(&stats);
  std::map<std::string, double> s;
  for (const auto& x : stats.stats()) s[x.name()] = x.value();
  EXPECT_EQ(s["gpu0.tx.READ_REQ.packets"], 8);     // 1024 B = 8 lines
  EXPECT_EQ(s["gpu1.tx.READ_RESP.bytes"], 1024);
  EXPECT_EQ(s["gpu1.tx.WRITE.packets"], 1);        // the flag
  EXPECT_EQ(s["gpu0.ld_value_sum"], 4.0 * 256);    // the load after the copy sees the data
  EXPECT_GT(s["gpu0.flag_wait.count"], 0);
}

TEST(Hopper, FlagsOrderBlocksAcrossKernelsAndTbDependenciesGateConsumers) {
  isa::Workload wl = one_kernel(1, 4);
  auto* sig = add(wl, isa::FLAG_SIGNAL);  // producer: each block bumps flag 0
  sig->set_value(1);
  auto* k2 = wl.add_kernels();
  k2->set_name("consumer");
  k2->set_grid_x(1);
  k2->set_grid_y(1);
  k2->set_threads_per_block(128);
  auto* w = k2->add_program();
  w->set_op(isa::FLAG_WAIT);
  w->set_value(4);
  auto* la = wl.add_launches();
  la->set_kernel(1);
  la->set_stream(1);
  auto r = run(wl);
  EXPECT_EQ(r.gpu(0).flag_value(0, 0), 4u);
  EXPECT_EQ(r.stats["gpu0.tbs_completed"], 5);

  // TB dependency: consumer block b waits for producer block b (which runs a long mma).
  isa::Workload d = one_kernel(1, 2);
  auto* m = add(d, isa::MMA);
  m->set_m(128);
  m->set_n(128);
  m->set_k(640);
  auto* c2 = d.add_kernels();
  c2->set_name("consumer");
  c2->set_grid_x(2);
  c2->set_grid_y(1);
  c2->set_threads_per_block(128);
  c2->add_program()->set_op(isa::BAR);
  auto* l2 = d.add_launches();
  l2->set_kernel(1);
  l2->set_stream(1);
  auto* dep = l2->add_deps();
  dep->set_producer(0);
  dep->set_scale_num(1);
  dep->set_scale_den(1);
  auto rd = run(d);
  const auto& C = rd.gpu(0).launch_state(1);
  EXPECT_GE(C.end_ps, (1000 + 10 + 5120) * 1000ull);  // after its producer block's mma
  EXPECT_LT(C.end_ps, (1000 + 10 + 5120 + 100) * 1000ull);
}

TEST(Hopper, PersistentKernelsLoopOverLogicalBlocks) {
  auto wl = one_kernel(1, 40);
  wl.mutable_kernels(0)->set_persistent(true);
  wl.mutable_kernels(0)->set_smem_bytes(200 * 1024);
  auto* m = add(wl, isa::MMA);
  m->set_m(128);
  m->set_n(128);
  m->set_k(64);
  auto r = run(wl);
  EXPECT_EQ(r.stats["gpu0.tbs_completed"], 40);
  EXPECT_EQ(r.stats["gpu0.kernel0.k.tbs"], 40);
  EXPECT_DOUBLE_EQ(r.stats["gpu0.finish_time"], (1000 + 10 * (10 + 512)) * 1000.0);  // 4 SMs x 10 blocks
}

TEST(Hopper, ClustersOfFourOrMoreCtasAreLimitedByTheClusterSlots) {
  // 16 blocks (one per SM) on 16 SMs: one round; clusters of 4 CTAs with 2 cluster slots hold
  // 8 CTAs at a time: two rounds; a cluster of 8 takes both slots: two rounds as well.
  auto wl = one_kernel(1, 16);
  wl.mutable_kernels(0)->set_smem_bytes(200 * 1024);
  auto* m = add(wl, isa::MMA);
  m->set_m(128);
  m->set_n(128);
  m->set_k(64);
  auto end_time = [&](std::uint32_t cluster, std::int64_t slots) {
    wl.mutable_kernels(0)->set_cluster_ctas(cluster);
    proto::Configure c = make_config(wl, 1, false);
    (*c.mutable_params())["gpu.num_sms"].set_i(16);
    (*c.mutable_params())["gpu.max_clusters_4"].set_i(slots);
    HostedModel h;
    h.configure(c);
    h.sim().run_until(kNever);
    EXPECT_TRUE(h.done()) << h.blocked_reason();
    return h.sim().now();
  };
  const TimePs one = (1000 + 1 * (10 + 512)) * 1000, two = (1000 + 2 * (10 + 512)) * 1000;
  EXPECT_EQ(end_time(4, 0), one);  // no limit
  EXPECT_EQ(end_time(2, 2), one);  // 2-CTA clusters take no slot
  EXPECT_EQ(end_time(4, 4), one);
  EXPECT_EQ(end_time(4, 2), two);
  EXPECT_EQ(end_time(8, 2), two);
  wl.mutable_kernels(0)->set_cluster_ctas(8);
  proto::Configure c = make_config(wl, 1, false);
  (*c.mutable_params())["gpu.max_clusters_4"].set_i(1);
  HostedModel bad;
  EXPECT_THROW(bad.configure(c), ConfigError);  // a cluster of 8 needs 2 slots
}

TEST(Hopper, SmPartitionsAndPrioritiesShareTheGpu) {
  auto wl = one_kernel(1, 4);
  wl.mutable_kernels(0)->set_smem_bytes(200 * 1024);
  auto* m = add(wl, isa::MMA);
  m->set_m(128);
  m->set_n(128);
  m->set_k(64);
  wl.mutable_launches(0)->set_sm_first(0);
  wl.mutable_launches(0)->set_sm_count(2);  // 4 blocks on 2 SMs: 2 waves
  auto* la = wl.add_launches();
  la->set_kernel(0);
  la->set_stream(1);
  la->set_sm_first(2);
  la->set_sm_count(2);
  auto r = run(wl);
  EXPECT_DOUBLE_EQ(r.stats["gpu0.kernel0.k.end"], 1000 + 2 * (10 + 512));
  EXPECT_DOUBLE_EQ(r.stats["gpu0.kernel1.k.end"], 1000 + 2 * (10 + 512));
}

TEST(Hopper, HigherPriorityLaunchesGetFreedSmsFirst) {
  // Two launches of 8 one-block-per-SM blocks on 4 SMs, both released at once: the
  // priority-1 launch (launch 1) takes the SMs first and finishes after 2 waves; the other
  // finishes after 4.
  auto wl = one_kernel(1, 8);
  wl.mutable_kernels(0)->set_smem_bytes(200 * 1024);
  auto* m = add(wl, isa::MMA);
  m->set_m(128);
  m->set_n(128);
  m->set_k(64);
  auto* la = wl.add_launches();
  la->set_kernel(0);
  la->set_stream(1);
  la->set_priority(1);
  auto r = run(wl);
  EXPECT_DOUBLE_EQ(r.stats["gpu0.kernel1.k.end"], 1000 + 2 * (10 + 512));
  EXPECT_DOUBLE_EQ(r.stats["gpu0.kernel0.k.end"], 1000 + 4 * (10 + 512));
}

TEST(Hopper, BadWorkloadsAreConfigErrorsNamingTheKernel) {
  auto wl = one_kernel();
  wl.mutable_kernels(0)->set_smem_bytes(300 * 1024);
  add(wl, isa::BAR);
  HostedModel m;
  try {
    m.configure(make_config(wl, 1, false));
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("'k' does not fit"), std::string::npos) << e.what();
  }
  auto wl2 = one_kernel();
  add(wl2, isa::ENDLOOP);
  HostedModel m2;
  EXPECT_THROW(m2.configure(make_config(wl2, 1, false)), ConfigError);
  auto wl3 = one_kernel();  // a read-only mark on what is not a remote load
  mem(wl3, isa::ST_REMOTE, 1, 128, 0, 0, 0)->set_read_only(true);
  HostedModel m3;
  try {
    m3.configure(make_config(wl3, 1, false));
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("instruction 0: read_only (.nc) belongs to a remote load"), std::string::npos)
        << e.what();
  }
}

TEST(Hopper, SeededJitterIsReproducibleAndChangesWithTheSeed) {
  auto wl = one_kernel(1, 16);
  auto* m = add(wl, isa::MMA);
  m->set_m(128);
  m->set_n(128);
  m->set_k(64);
  auto once = [&](std::uint64_t seed) {
    auto c = make_config(wl, 1, false);
    (*c.mutable_params())["gpu.block_jitter_frac"].set_d(0.1);
    (*c.mutable_params())["gpu.launch_skew_ns"].set_d(500.0);
    c.set_seed(seed);
    HostedModel h;
    h.configure(c);
    h.sim().run_until(kNever);
    return h.sim().now();
  };
  EXPECT_EQ(once(1), once(1));
  EXPECT_NE(once(1), once(2));
}

}  // namespace
}  // namespace cais::gpu

namespace cais::gpu {
TEST(Affine, QuotientTermsAreFloorDivisions) {
  // tile t = bx + 132*L0 of a persistent kernel with 7 tiles per row: row floor(t/7), column t - 7*row
  isa::Affine a;
  a.set_block_x(10);
  a.add_loop(1320);
  isa::Quotient* q = a.add_quotient();
  q->set_block_x(1);
  q->add_loop(132);
  q->set_divisor(7);
  q->set_scale(1000 - 70);
  const std::int64_t loops[] = {2};
  const std::int64_t t = 5 + 132 * 2;  // 269 = row 38, column 3
  EXPECT_EQ(eval_affine(a, 5, 0, 0, loops, 1), 38 * 1000 + 3 * 10);
  EXPECT_EQ(t / 7, 38);
  EXPECT_EQ(floor_div(-7, 2), -4);
  EXPECT_EQ(floor_div(7, 2), 3);
  EXPECT_EQ(floor_div(-8, 2), -4);
}
}  // namespace cais::gpu
