// The SM clock follows the load (gpu.clock_mhz_without_mma): gpu.clock_mhz while a kernel with
// mma instructions runs, the other clock otherwise, changed at kernel boundaries.
#include <gtest/gtest.h>

#include "hopper_test_util.h"

namespace cais::gpu {
namespace {
using namespace cais::gpu::test;

constexpr double kLaunchNs = 1000, kBlockNs = 10;  // set_gpu_defaults

void set_alu(isa::Instr* a, double flops) {  // `flops` FLOP, one per element
  a->set_op(isa::ALU);
  a->set_elements(static_cast<std::uint64_t>(flops));
  a->set_flops_per_element(1);
}

isa::Workload alu_kernel(double flops) {
  auto wl = one_kernel();
  set_alu(add(wl, isa::ALU), flops);
  return wl;
}

double finish_ns(const isa::Workload& wl, double without_mma_mhz) {
  HostedModel h;
  auto cfg = make_config(wl, 1, false);
  (*cfg.mutable_params())["gpu.clock_mhz_without_mma"].set_d(without_mma_mhz);
  const auto st = run_config(h, cfg);
  return st.at("gpu0.finish_time") / 1000.0;
}

TEST(HopperClock, AKernelWithoutMmaRunsAtTheOtherClock) {
  // 256 000 FLOP at 256 FLOP per cycle: 1000 cycles, 1000 ns at 1 GHz, 500 ns at 2 GHz.
  const auto wl = alu_kernel(256000);
  EXPECT_DOUBLE_EQ(finish_ns(wl, 0), kLaunchNs + kBlockNs + 1000);
  EXPECT_DOUBLE_EQ(finish_ns(wl, 2000), kLaunchNs + kBlockNs + 500);
}

TEST(HopperClock, AnMmaKernelRunsAtGpuClockWhateverTheOtherClock) {
  auto wl = one_kernel();
  add_mma(wl, 128, 128, 64);  // 512 ns at 1 GHz
  set_alu(add(wl, isa::ALU), 256000);  // its ALU work too: the clock is the GPU's, not the instruction's
  EXPECT_DOUBLE_EQ(finish_ns(wl, 0), kLaunchNs + kBlockNs + 512 + 1000);
  EXPECT_DOUBLE_EQ(finish_ns(wl, 2000), kLaunchNs + kBlockNs + 512 + 1000);
}

TEST(HopperClock, TheClockRisesWhenTheLastMmaKernelEnds) {
  // An mma kernel, then (same stream) an ALU kernel: the second runs at the other clock.
  auto wl = one_kernel();
  add_mma(wl, 128, 128, 64);
  auto* k2 = wl.add_kernels();
  *k2 = wl.kernels(0);
  k2->set_name("alu");
  k2->clear_program();
  set_alu(k2->add_program(), 256000);
  wl.add_launches()->set_kernel(1);
  const double mma = kLaunchNs + kBlockNs + 512, alu = kLaunchNs + kBlockNs;
  EXPECT_DOUBLE_EQ(finish_ns(wl, 0), mma + alu + 1000);
  EXPECT_DOUBLE_EQ(finish_ns(wl, 2000), mma + alu + 500);
}

TEST(HopperClock, ANegativeClockIsRefusedByName) {
  auto cfg = make_config(alu_kernel(256), 1, false);
  (*cfg.mutable_params())["gpu.clock_mhz_without_mma"].set_d(-1);
  expect_config_error(cfg, "gpu.clock_mhz_without_mma");
}

}  // namespace
}  // namespace cais::gpu
