// Warp-specialised CTAs (isa.proto Kernel.warp_groups): a CTA's warp groups run side by side on
// its SM, hold its resources once, and its block is done when every group has ended.
#include <gtest/gtest.h>

#include "hopper_test_util.h"

namespace cais::gpu::test {
namespace {

isa::Instr* group_ins(isa::Kernel* k, int g, isa::Opcode op) {
  auto* i = k->mutable_warp_groups(g)->add_program();
  i->set_op(op);
  return i;
}

// One SM-filling CTA (2048 threads) per block. Group "consumer" first waits for a flag that group
// "producer" sets after a 4 KiB load, then runs 512 ns of mma: one instruction stream in this
// order would wait forever.
isa::Workload producer_consumer(std::uint32_t grid) {
  auto wl = one_kernel(1, grid);
  auto* k = wl.mutable_kernels(0);
  k->set_threads_per_block(2048);
  k->add_warp_groups()->set_name("consumer");
  k->add_warp_groups()->set_name("producer");
  auto* w = group_ins(k, 0, isa::FLAG_WAIT);
  w->set_buffer(0);
  w->mutable_addr()->set_block_x(8);
  w->set_value(1);
  auto* m = group_ins(k, 0, isa::MMA);
  m->set_m(128);
  m->set_n(128);
  m->set_k(64);  // 2*128*128*64 FLOP at 4096 FLOP/cycle, 1 GHz: 512 ns
  m->set_dtype(isa::BF16);
  auto* ld = group_ins(k, 1, isa::LD);
  ld->set_buffer(0);
  ld->set_rows(1);
  ld->set_row_bytes(4096);
  ld->mutable_addr()->set_base(65536);
  ld->mutable_addr()->set_block_x(4096);
  auto* s = group_ins(k, 1, isa::FLAG_SIGNAL);
  s->set_buffer(0);
  s->mutable_addr()->set_block_x(8);
  s->set_value(1);
  return wl;
}

TEST(WarpGroups, GroupsOfOneCtaRunSideBySideAndItsBlockEndsWithTheLast) {
  const auto one_wave = run(producer_consumer(4)).stats;  // 4 SMs: every CTA resident at once
  EXPECT_EQ(one_wave.at("gpu0.tbs_completed"), 4);
  // launch 1000 + TB overhead 10 + the load (L2 100 + HBM 400 ns and the port) + mma 512 ns
  const double t1 = one_wave.at("gpu0.finish_time") / 1000.0;
  EXPECT_GT(t1, 1000 + 10 + 500 + 512);
  EXPECT_LT(t1, 1000 + 10 + 600 + 512 + 50);
  // 8 blocks on 4 SMs: a CTA holds its SM (all its threads, counted once) until both groups
  // end, so the second wave starts when the first has finished (not when its producer has,
  // ~530 ns in), and takes as long as a block.
  const auto two_waves = run(producer_consumer(8)).stats;
  EXPECT_EQ(two_waves.at("gpu0.tbs_completed"), 8);
  const double t2 = two_waves.at("gpu0.finish_time") / 1000.0;
  EXPECT_GT(t2 - t1, 10 + 500 + 512);
  EXPECT_LT(t2 - t1, t1 - 1000 + 10);
}

// A threshold of 0 or less is met by a flag nobody has written (NVLS's slot credits for the
// first steps: flag.wait wait_for=[-7 + L1]).
TEST(WarpGroups, AFlagNeverWrittenIsZero) {
  auto wl = producer_consumer(1);
  auto* w = wl.mutable_kernels(0)->mutable_warp_groups(0)->mutable_program(0);
  w->mutable_addr()->set_base(4096);  // nobody signals it
  w->set_value(5);
  w->mutable_value_of_block()->set_base(-2);
  w->mutable_value_of_block()->set_block_x(2);  // block 0 waits for >= -2
  EXPECT_EQ(run(wl).stats.at("gpu0.tbs_completed"), 1);
}

TEST(WarpGroups, WhatTheEngineCannotHonourIsAConfigError) {
  auto both = producer_consumer(1);
  add(both, isa::BAR);
  expect_config_error(both, "both a program and warp groups");
  auto persistent = producer_consumer(1);
  persistent.mutable_kernels(0)->set_persistent(true);
  expect_config_error(persistent, "warp groups belong to a plain kernel");
  auto many = producer_consumer(1);
  for (int g = 0; g < 31; ++g) many.mutable_kernels(0)->add_warp_groups()->set_name("idle");
  expect_config_error(many, "at most 32 warps");
  auto unclosed = producer_consumer(1);
  group_ins(unclosed.mutable_kernels(0), 1, isa::LOOP)->set_count(2);
  expect_config_error(unclosed, "kernel 'k' warp group 'producer': loop not closed");
}

}  // namespace
}  // namespace cais::gpu::test
