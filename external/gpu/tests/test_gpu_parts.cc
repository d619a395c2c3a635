// Parts of the Hopper GPU used on their own, without a simulator: the local memory system and
// functional memory (the split of HopperGpu into parts with one job each).
#include <gtest/gtest.h>

#include "cais/gpu/functional_memory.h"
#include "cais/gpu/local_memory.h"

namespace cais::gpu {
namespace {

HopperConfig memory_config() {
  HopperConfig c;
  c.num_sms = 2;
  c.l2_bytes = 1 << 20;
  c.l2_bytes_per_ps = 1.0;        // 1 B/ps
  c.sm_load_bytes_per_ps = 0.5;   // the SM port is the narrower one
  c.sm_store_bytes_per_ps = 0.5;
  c.hbm_bytes_per_ps = 0.25;
  c.l2_latency_ps = 100;
  c.hbm_latency_ps = 400;
  return c;
}

TEST(LocalMemory, AReadMissWaitsForHbmTheRepeatHitsInL2AndWritesCompleteInL2) {
  const HopperConfig c = memory_config();
  LocalMemory m(c);
  // miss: HBM serves 1000 B in 4000 ps, + HBM and L2 latency
  EXPECT_EQ(m.access(0, 0, 7, 1000, false), 4000 + 400 + 100);
  EXPECT_EQ(m.l2_misses(), 1u);
  EXPECT_EQ(m.hbm_read_bytes(), 1000u);
  // hit at t = 10000 on the other SM: its port (2000 ps) + L2 latency
  EXPECT_EQ(m.access(10000, 1, 7, 1000, false), 10000 + 2000 + 100);
  EXPECT_EQ(m.l2_hits(), 1u);
  // a write completes in L2 even though HBM is busy with its write-back
  EXPECT_EQ(m.access(20000, 0, 8, 1000, true), 20000 + 2000 + 100);
  EXPECT_EQ(m.hbm().bytes, 2000u);
  EXPECT_EQ(m.l2().bytes, 3000u);
}

// A round of register loads: each warp cycles through its delay (latency, then its share at the
// warp's load rate) and the port, where the warps queue (mean-value analysis).
TEST(LocalMemory, AWarpRoundIsItsWarpsQueueingAtThePort) {
  HopperConfig c = memory_config();
  c.warp_load_bytes_per_ps = 0.1;
  const LocalMemory m(c);
  // one warp: 500 ps to the first bytes + 1000 B at 0.1 B/ps, then 1000 B loaded and 1000 B
  // stored at the port's 0.5 B/ps
  EXPECT_EQ(m.warp_round_end(0, 500, 1000, 1000, 1), 500 + 10000 + 2000 + 2000);
  // four warps of the same share: delay 10500 and port 4000 per warp. Without queueing the round
  // would take max(14500, 4 x 4000) = 16000; the warps queue: MVA over n = 1..4 gives 19139.
  EXPECT_NEAR(static_cast<double>(m.warp_round_end(0, 500, 4000, 4000, 4)), 19138.9, 1.0);
  // many warps: the port's time for all their bytes (64000 B at 0.5 B/ps)
  EXPECT_NEAR(static_cast<double>(m.warp_round_end(0, 500, 32000, 32000, 32)), 128000.0, 0.01 * 128000);
  EXPECT_GE(m.warp_round_end(0, 500, 32000, 32000, 32), 128000);
}

TEST(FunctionalMemory, StoresAccumulateCopiesAddAndLoadsSum) {
  isa::Workload wl;
  wl.set_num_gpus(1);
  wl.set_functional(true);
  for (const char* n : {"A", "B"}) {
    auto* b = wl.add_buffers();
    b->set_name(n);
    b->set_bytes(64);
    b->set_dtype(isa::FP32);
  }
  auto w = Workload::parse(wl.SerializeAsString(), 1);
  FunctionalMemory f(*w, true, "gpu0", 0);
  f.fill(0, 0, 2, 8, 16, 3.0, false);   // A[0,1] = A[4,5] = 3
  f.fill(0, 0, 1, 4, 0, 1.0, true);     // A[0] = 4
  f.copy_rows(0, 0, 1, 0, 2, 8, 16, false);
  f.copy_rows(0, 0, 1, 0, 1, 8, 0, true);  // B[0] = 8, B[1] = 6
  EXPECT_EQ(f.value(1, 0), 8.0);
  EXPECT_EQ(f.value(1, 1), 6.0);
  EXPECT_EQ(f.value(1, 4), 3.0);
  f.apply_store(unicast_addr(0, w->buffers()[1].base + 8), {2.0, 2.0}, true);  // B[2], B[3] += 2
  f.load(1, 0, 1, 16, 0);
  EXPECT_EQ(f.ld_value_sum(), 8.0 + 6.0 + 2.0 + 2.0);
  std::vector<double> v;
  f.read_values(unicast_addr(0, w->buffers()[1].base + 16), 8, v);
  EXPECT_EQ(v, (std::vector<double>{3.0, 3.0}));
}

TEST(FunctionalMemory, AnInitRankBufferStartsAtTheGpusRankPlusOne) {
  isa::Workload wl;
  wl.set_num_gpus(4);
  wl.set_functional(true);
  for (bool init : {true, false}) {
    auto* b = wl.add_buffers();
    b->set_name(init ? "IN" : "OUT");
    b->set_bytes(64);
    b->set_dtype(isa::FP32);
    b->set_init_rank(init);
  }
  auto w = Workload::parse(wl.SerializeAsString(), 4);
  FunctionalMemory f(*w, true, "gpu2", 2);
  for (std::uint64_t e = 0; e < 16; ++e) {
    EXPECT_EQ(f.value(0, e), 3.0);
    EXPECT_EQ(f.value(1, e), 0.0);
  }
  EXPECT_EQ(f.summary(0).sum, 48.0);
}

}  // namespace
}  // namespace cais::gpu
