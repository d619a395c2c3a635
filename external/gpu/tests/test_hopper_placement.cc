// Where the block scheduler puts CTAs (TPCs, clusters) and how persistent kernels share out
// their blocks: dynamic blocks, clusters in step, and launches that continue another's CTAs.
//
// Every kernel here is one 512 ns MMA per block with 200 KB of shared memory (one block per
// SM); a launch is ready 1000 ns after its release and a block starts 10 ns after it is placed
// (hopper_test_util.h), so a wave of blocks takes 522 ns.
#include <gtest/gtest.h>

#include "hopper_test_util.h"

namespace cais::gpu::test {
namespace {

constexpr double kLaunch = 1000, kWave = 10 + 512;

isa::Kernel* mma_kernel(isa::Workload& wl, const std::string& name, std::uint32_t grid) {
  auto* k = add_kernel(wl, name, grid);
  k->set_smem_bytes(200 * 1024);
  auto* m = k->add_program();
  m->set_op(isa::MMA);
  m->set_m(128);
  m->set_n(128);
  m->set_k(64);
  return k;
}

isa::Launch* launch(isa::Workload& wl, std::uint32_t kernel, std::uint32_t stream, std::int32_t priority = 0) {
  auto* la = wl.add_launches();
  la->set_kernel(kernel);
  la->set_stream(stream);
  la->set_priority(priority);
  return la;
}

isa::Workload empty() {
  isa::Workload wl = one_kernel(1, 1);
  wl.clear_kernels();
  wl.clear_launches();
  return wl;
}

std::map<std::string, double> run_on(const isa::Workload& wl, std::uint32_t sms) {
  proto::Configure c = make_config(wl, 1, false);
  (*c.mutable_params())["gpu.num_sms"].set_i(sms);
  HostedModel h;
  return run_config(h, c);
}

TEST(Placement, AKernelStartsWhenItsFirstCtaTakesAnSm) {
  // Two launches of 8 blocks on 4 SMs, released together at priority 0: the second finds every
  // SM held, and the SMs the first launch's first wave frees go to its own second wave (earlier
  // in the dispatch order). first_cta (where CUPTI starts a kernel) is when the second launch's
  // first CTA takes an SM; start stays the instant its launch was ready.
  isa::Workload wl = empty();
  mma_kernel(wl, "k", 8);
  launch(wl, 0, 0);
  launch(wl, 0, 1);
  auto st = run_on(wl, 4);
  EXPECT_DOUBLE_EQ(st["gpu0.kernel0.k.first_cta"], kLaunch);
  EXPECT_DOUBLE_EQ(st["gpu0.kernel1.k.start"], kLaunch);
  EXPECT_DOUBLE_EQ(st["gpu0.kernel1.k.first_cta"], kLaunch + 2 * kWave);
  EXPECT_DOUBLE_EQ(st["gpu0.kernel1.k.end"], kLaunch + 4 * kWave);
}

TEST(Placement, APlainGridTakesOneSmPerTpcSoA2CtaClusterWaitsForAWholeTpc) {
  // 4 SMs = 2 TPCs. Two plain CTAs go one per TPC (SMs 0 and 2, as Hopper's scheduler spreads a
  // grid), so a 2-CTA cluster released with them finds no TPC with both SMs free and starts when
  // they end, although two SMs are idle; with the plain grid on one TPC it would start at once.
  isa::Workload wl = empty();
  mma_kernel(wl, "plain", 2);
  mma_kernel(wl, "cluster", 2)->set_cluster_ctas(2);
  launch(wl, 0, 0, 1);  // dispatched first
  launch(wl, 1, 1, 0);
  auto st = run_on(wl, 4);
  EXPECT_DOUBLE_EQ(st["gpu0.kernel0.plain.end"], kLaunch + kWave);
  EXPECT_DOUBLE_EQ(st["gpu0.kernel1.cluster.first_cta"], kLaunch + kWave);
  EXPECT_DOUBLE_EQ(st["gpu0.kernel1.cluster.end"], kLaunch + 2 * kWave);
}

TEST(Placement, ClustersOfTwoFillEveryTpcOfAnIdleGpu) {
  // 8 CTAs in clusters of 2 on 8 SMs: one wave, each cluster on its own TPC.
  isa::Workload wl = empty();
  mma_kernel(wl, "k", 8)->set_cluster_ctas(2);
  launch(wl, 0, 0);
  auto st = run_on(wl, 8);
  EXPECT_DOUBLE_EQ(st["gpu0.kernel0.k.end"], kLaunch + kWave);
}

TEST(Persistent, DynamicCtasTakeTheNextBlockLeftAndLateOnesFindNone) {
  // 12 blocks, 6 persistent CTAs on 4 SMs. Static: CTA c runs blocks c and c + 6, so CTAs 4
  // and 5 wait for the first four to finish both of theirs: 4 waves. Dynamic: the four resident
  // CTAs take blocks 0-11 in turn (3 waves); CTAs 4 and 5 then find none and leave at once.
  for (bool dynamic : {false, true}) {
    isa::Workload wl = empty();
    auto* k = mma_kernel(wl, "k", 12);
    k->set_persistent(true);
    k->set_ctas(6);
    k->set_dynamic_blocks(dynamic);
    launch(wl, 0, 0);
    auto st = run_on(wl, 4);
    EXPECT_DOUBLE_EQ(st["gpu0.kernel0.k.end"], kLaunch + (dynamic ? 3 : 4) * kWave) << dynamic;
    EXPECT_DOUBLE_EQ(st["gpu0.kernel0.k.tbs"], 12) << dynamic;
  }
}

TEST(Persistent, AContinuationRunsOnTheSmsItsCtasLeaveBeforeAnyOtherKernel) {
  // A persistent dynamic launch of 4 CTAs (8 blocks) on 4 SMs, continued by a 4-CTA launch
  // (offset 0), and a third kernel of 4 blocks at the highest priority released 100 ns later.
  // The continuation takes each SM as its CTA leaves (2 waves), so the third kernel, which
  // found no SM free, runs only after it: 3 waves, then 1.
  isa::Workload wl = empty();
  auto* p = mma_kernel(wl, "dp", 8);
  p->set_persistent(true);
  p->set_ctas(4);
  p->set_dynamic_blocks(true);
  mma_kernel(wl, "sk", 4);
  mma_kernel(wl, "other", 4);
  launch(wl, 0, 0, 0);
  auto* c = launch(wl, 1, 1, 0);
  c->set_continues(1);  // launch 0
  c->set_continue_offset(0);
  launch(wl, 2, 2, 5)->set_start_ns(100);
  auto st = run_on(wl, 4);
  EXPECT_DOUBLE_EQ(st["gpu0.kernel0.dp.end"], kLaunch + 2 * kWave);
  EXPECT_DOUBLE_EQ(st["gpu0.kernel1.sk.first_cta"], kLaunch + 2 * kWave);
  EXPECT_DOUBLE_EQ(st["gpu0.kernel1.sk.end"], kLaunch + 3 * kWave);
  EXPECT_DOUBLE_EQ(st["gpu0.kernel2.other.first_cta"], kLaunch + 3 * kWave);
  EXPECT_DOUBLE_EQ(st["gpu0.kernel2.other.end"], kLaunch + 4 * kWave);  // its launch was ready long before
}

TEST(Persistent, ALateCtaWithNoBlockLeftStillRunsItsContinuation) {
  // 6 CTAs, 4 blocks, on 4 SMs: CTAs 4 and 5 start when the first wave leaves, find no block
  // and go straight on with their continuation blocks (offset 2: CTAs 2-5 continue as 0-3).
  isa::Workload wl = empty();
  auto* p = mma_kernel(wl, "dp", 4);
  p->set_persistent(true);
  p->set_ctas(6);
  p->set_dynamic_blocks(true);
  mma_kernel(wl, "sk", 4);
  launch(wl, 0, 0);
  auto* c = launch(wl, 1, 1);
  c->set_continues(1);
  c->set_continue_offset(2);
  auto st = run_on(wl, 4);
  EXPECT_DOUBLE_EQ(st["gpu0.kernel1.sk.tbs"], 4);
  EXPECT_DOUBLE_EQ(st["gpu0.kernel1.sk.end"], kLaunch + 2 * kWave);
  EXPECT_DOUBLE_EQ(st["gpu0.kernel0.dp.end"], kLaunch + kWave);
}

TEST(Persistent, WhatTheEngineCannotHonourIsAConfigError) {
  isa::Workload plain = empty();
  mma_kernel(plain, "k", 4)->set_dynamic_blocks(true);  // not persistent
  launch(plain, 0, 0);
  expect_config_error(plain, "belong to a persistent kernel");

  isa::Workload chained = empty();
  auto* p = mma_kernel(chained, "dp", 4);
  p->set_persistent(true);
  p->set_dynamic_blocks(true);
  mma_kernel(chained, "sk", 4);
  launch(chained, 0, 0);
  launch(chained, 1, 0)->set_continues(1);  // same stream: it would wait for launch 0
  expect_config_error(chained, "no stream predecessor");
  chained.mutable_launches(1)->set_stream(1);
  chained.mutable_launches(1)->set_continue_offset(2);  // CTAs 2-5 of a 4-CTA launch
  expect_config_error(chained, "more CTAs than that launch");
}

TEST(Placement, ADeadlockReportNamesTheLaunchThatFindsNoRoom) {
  // One SM: a waiter (high priority, 200 KB of shared memory) parks on a flag that only the
  // producer's block sets, and the producer's block needs the same SM. Nothing moves again; the
  // report says which launch has blocks no SM has room for.
  isa::Workload wl = empty();
  auto* waiter = add_kernel(wl, "waiter", 1);
  waiter->set_smem_bytes(200 * 1024);
  auto* w = waiter->add_program();
  w->set_op(isa::FLAG_WAIT);
  w->mutable_addr()->set_base(65536);
  w->set_value(1);
  mma_kernel(wl, "producer", 1);
  auto* sig = wl.mutable_kernels(1)->add_program();
  sig->set_op(isa::FLAG_SIGNAL);
  sig->mutable_addr()->set_base(65536);
  sig->set_value(1);
  launch(wl, 0, 0, 1);
  launch(wl, 1, 1, 0);
  proto::Configure c = make_config(wl, 1, false);
  (*c.mutable_params())["gpu.num_sms"].set_i(1);
  HostedModel h;
  h.configure(c);
  h.sim().run_until(kNever);
  ASSERT_FALSE(h.done());
  EXPECT_NE(h.blocked_reason().find("launch 1 'producer' cannot place 1 of its blocks: no SM of its 1 "
                                    "(gpu.num_sms=1) has room"), std::string::npos)
      << h.blocked_reason();
  // With two SMs the same launches finish.
  (*c.mutable_params())["gpu.num_sms"].set_i(2);
  HostedModel ok;
  run_config(ok, c);
}

}  // namespace
}  // namespace cais::gpu::test
