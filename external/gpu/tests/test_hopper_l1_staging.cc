// L1 staging (l1_staging.h): an SM's shared-memory configuration, the configuration a GEMM that
// holds it leaves to the next kernel's blocks, and the bound the remaining L1 puts on register
// loads in flight.
#include <gtest/gtest.h>

#include "cais/gpu/l1_staging.h"
#include "hopper_test_util.h"

namespace cais::gpu {
namespace {
using namespace cais::gpu::test;

constexpr std::uint64_t KiB = 1024;

HopperConfig one_sm() {
  HopperConfig c;
  c.num_sms = 1;
  c.smem_per_sm = 228 * KiB;
  c.l1_smem_per_sm = 256 * KiB;
  for (const std::uint64_t kb : {0, 8, 16, 32, 64, 100, 132, 164, 196, 228}) c.smem_configs.push_back(kb * KiB);
  return c;
}

TEST(L1Staging, AnSmTakesTheSmallestConfigurationThatHoldsItsBlocks) {
  const HopperConfig c = one_sm();
  L1Staging l1(c);
  l1.take_block(0, 0, 213 * KiB, true, false, false);  // a cuBLAS GEMM's CTA: 213 KB -> 228 KB
  EXPECT_EQ(l1.l1_bytes(0), 28 * KiB);
  l1.take_block(0, 1, 0, true, false, false);  // the next kernel on the emptied SM: no shared memory
  EXPECT_EQ(l1.l1_bytes(0), 256 * KiB);
  l1.take_block(0, 2, 40 * KiB, true, false, false);
  l1.take_block(0, 2, 80 * KiB, false, false, false);  // a second block of 40 KB: 64 -> 100 KB
  EXPECT_EQ(l1.l1_bytes(0), 156 * KiB);
  EXPECT_EQ(l1.config_launch(0), 2u);
}

TEST(L1Staging, AKeptConfigurationStaysForBlocksThatFitIt) {
  const HopperConfig c = one_sm();
  L1Staging l1(c);
  l1.take_block(0, 0, 213 * KiB, true, false, false);
  l1.take_block(0, 1, 0, true, true, false);  // launch 0 holds its carveout and still runs
  EXPECT_EQ(l1.l1_bytes(0), 28 * KiB);
  EXPECT_EQ(l1.config_launch(0), 0u);
  EXPECT_EQ(l1.kept_configs(), 1u);
  l1.take_block(0, 2, 213 * KiB, true, true, true);  // a later part of the GEMM (it holds too)
  EXPECT_EQ(l1.config_launch(0), 2u);
}

TEST(L1Staging, LoadsBeyondTheL1WaitForWhatIsInFlight) {
  HopperConfig c = one_sm();
  L1Staging l1(c);
  l1.take_block(0, 0, 213 * KiB, true, false, false);  // 28 KB of L1
  EXPECT_EQ(l1.admit(0, 0, 16 * KiB, 1000), 1000);  // fits: unchanged
  // 16 + 16 > 28 KB: the 4 KB it lacks come back with the first load at 1000, then its latency
  EXPECT_EQ(l1.admit(0, 0, 16 * KiB, 1000), 2000);
  EXPECT_EQ(l1.held_loads(), 1u);
  // alone but larger than the L1: 28 KB of its own lines cycle through once more (56 KB)
  EXPECT_EQ(l1.admit(0, 5000, 56 * KiB, 6000), 7000);
  // a configuration with the L1 to spare binds nothing
  l1.take_block(0, 1, 0, true, false, false);
  EXPECT_EQ(l1.admit(0, 10000, 64 * KiB, 11000), 11000);
}

// The engine: a GEMM-like kernel of 3 blocks that fill an SM each (213 KB of shared memory) on
// 2 SMs and, on a second stream, a block that loads 64 KiB into registers. The second wave's
// one GEMM block leaves SM 1 to the load, while the GEMM still runs.
std::map<std::string, double> gemm_then_stream(bool holds_carveout, std::uint32_t stream_of_load) {
  isa::Workload wl = one_kernel(1, 3);
  auto* g = wl.mutable_kernels(0);
  g->set_name("gemm");
  g->set_threads_per_block(1024);
  g->set_regs_per_thread(64);  // the whole register file: nothing runs beside it
  g->set_smem_bytes(213 * 1024);
  g->set_holds_carveout(holds_carveout);
  add_mma(wl, 128, 128, 2048);  // 16384 ns
  auto* s = wl.add_kernels();
  s->set_name("stream");
  s->set_grid_x(1);
  s->set_grid_y(1);
  s->set_threads_per_block(512);
  s->set_regs_per_thread(32);
  s->set_loads_via_l1(true);
  auto* ld = s->add_program();
  ld->set_op(isa::LD);
  ld->set_is_async(true);
  ld->set_rows(1);
  ld->set_row_bytes(65536);
  s->add_program()->set_op(isa::WAIT);
  auto* la = wl.add_launches();
  la->set_kernel(1);
  la->set_stream(stream_of_load);
  proto::Configure c = make_config(wl, 1, false);
  (*c.mutable_params())["gpu.num_sms"].set_i(2);
  HostedModel h;
  return run_config(h, c);
}

TEST(L1Staging, ABlockOnAnSmARunningGemmFreedGetsItsSmallL1) {
  const auto kept = gemm_then_stream(true, 1), reset = gemm_then_stream(false, 1), after = gemm_then_stream(true, 0);
  EXPECT_EQ(kept.at("gpu0.l1.kept_configs"), 1);
  EXPECT_EQ(kept.at("gpu0.l1.held_loads"), 1);
  for (const auto* st : {&reset, &after}) {
    EXPECT_EQ(st->at("gpu0.l1.kept_configs"), 0);
    EXPECT_EQ(st->at("gpu0.l1.held_loads"), 0);
  }
  const auto load_ns = [](const std::map<std::string, double>& st) {
    return st.at("gpu0.kernel1.stream.end") - st.at("gpu0.kernel1.stream.first_cta");
  };
  // The load alone: 65536 B through HBM at 0.5 B/ps, + 400 + 100 ns = 631 ns. Through 28 KB of
  // L1 it first cycles (65536 - 28672) / 28672 x 631 = 811 ns of its own lines.
  EXPECT_NEAR(load_ns(kept) - load_ns(reset), 811.3, 2.0);
  EXPECT_DOUBLE_EQ(load_ns(after), load_ns(reset));
  // and it started on SM 1 while the GEMM's third block ran on SM 0
  EXPECT_LT(kept.at("gpu0.kernel1.stream.first_cta"), kept.at("gpu0.kernel0.gemm.end"));
}

}  // namespace
}  // namespace cais::gpu
