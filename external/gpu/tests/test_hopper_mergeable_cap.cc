// The per-GPU cap of outstanding mergeable lines (net.cais_merge.outstanding_cap, spec 3.5 step
// 3.4) against the probe switch: ld.cais lines count until their response, red.cais lines until
// the switch's CAIS_RED_ACK; the GPU stops issuing at the cap and resumes on the answer.
#include <gtest/gtest.h>

#include "hopper_test_util.h"

namespace cais::gpu::test {
namespace {

constexpr std::uint32_t kLines = 64;

// GPU 0 of three sends kLines 128 B lines of `op` to GPU 1: two participants besides the home,
// so a merge unit would handle them (aux = 2).
isa::Workload three_gpus(isa::Opcode op) {
  auto wl = one_kernel(3, 1);
  wl.mutable_launches(0)->add_gpus(0);
  mem(wl, op, kLines, 128, 1024, 0, 1);
  return wl;
}

RunResult run_capped(const isa::Workload& wl, double cap_kb, bool bulk = false) {
  seen().clear();
  proto::Configure c = make_config(wl, 3, true);
  auto& m = *c.mutable_params();
  m["net.features"].set_s("cais_merge");  // the probe stands in for the merge unit's acks
  m["net.cais_merge.outstanding_cap"].set_b(true);
  m["net.cais_merge.outstanding_cap_kb"].set_d(cap_kb);
  if (bulk) m["gpu.bulk_lines"].set_i(4);
  RunResult r;
  r.m = std::make_unique<HostedModel>();
  r.stats = run_config(*r.m, c);
  return r;
}

struct AckProbe {  // the probe acks red.cais, held back until `from_ps`
  explicit AckProbe(TimePs from_ps) {
    probe_red_acks() = true;
    probe_red_acks_from_ps() = from_ps;
  }
  ~AckProbe() {
    probe_red_acks() = false;
    probe_red_acks_from_ps() = 0;
  }
};

TEST(HopperMergeableCap, RedCaisStopsAtTheCapAndResumesOnTheAcks) {
  AckProbe acks(5000000);  // no ack before 5 us
  const auto r = run_capped(three_gpus(isa::RED_CAIS), 1.0);  // 8 lines
  EXPECT_EQ(r.stats.at("gpu0.tx.CAIS_RED.packets"), kLines);
  EXPECT_EQ(r.stats.at("gpu0.mergeable.high_water_lines"), 8);
  EXPECT_EQ(r.stats.at("gpu0.mergeable.red_ack_lines"), kLines);
  EXPECT_GT(r.stats.at("gpu0.stall.mergeable_cap"), 0);
  EXPECT_GT(r.stats.at("gpu0.finish_time"), 5e6);  // the last lines left after the held acks
}

TEST(HopperMergeableCap, AWideCapNeverStallsAndStillCountsEveryLineBack) {
  AckProbe acks(5000000);
  const auto r = run_capped(three_gpus(isa::RED_CAIS), 1280.0);
  EXPECT_EQ(r.stats.at("gpu0.stall.mergeable_cap"), 0);
  EXPECT_EQ(r.stats.at("gpu0.mergeable.high_water_lines"), kLines);  // all posted before any ack
  EXPECT_EQ(r.stats.at("gpu0.mergeable.red_ack_lines"), kLines);
  EXPECT_LT(r.stats.at("gpu0.finish_time"), 5e6);  // posted: the kernel does not wait for acks
  EXPECT_GT(r.stats.at("end"), 5e6);              // the run does, to see every line acked
}

TEST(HopperMergeableCap, LdCaisCountsUntilItsResponse) {
  const auto r = run_capped(three_gpus(isa::LD_CAIS), 1.0);
  EXPECT_EQ(r.stats.at("gpu0.rx.CAIS_LD_RESP.packets"), kLines);
  EXPECT_EQ(r.stats.at("gpu0.mergeable.high_water_lines"), 8);
  EXPECT_GT(r.stats.at("gpu0.stall.mergeable_cap"), 0);
  EXPECT_EQ(r.stats.at("gpu0.mergeable.red_ack_lines"), 0);
  const auto wide = run_capped(three_gpus(isa::LD_CAIS), 1280.0);
  EXPECT_EQ(wide.stats.at("gpu0.stall.mergeable_cap"), 0);
  EXPECT_LT(wide.stats.at("gpu0.finish_time"), r.stats.at("gpu0.finish_time"));  // 8 in flight cost time
}

TEST(HopperMergeableCap, BulkPacketsShrinkSoHeldBackLinesCannotFillTheCap) {
  // 4 SMs x 1 plane x (N-1) held-back lines must stay below 8: N drops to 2, no deadlock.
  AckProbe acks(0);
  const auto r = run_capped(three_gpus(isa::RED_CAIS), 1.0, true);
  EXPECT_EQ(r.stats.at("gpu0.mergeable.red_ack_lines"), kLines);
  EXPECT_LE(r.stats.at("gpu0.mergeable.high_water_lines"), 8);
  EXPECT_EQ(r.stats.at("gpu0.tx.CAIS_RED.packets"), kLines);  // counted per line
}

TEST(HopperMergeableCap, AnAckWithoutTheCapIsAnError) {
  AckProbe acks(0);
  try {
    run(three_gpus(isa::RED_CAIS), 3, true);
    FAIL() << "no error";
  } catch (const InvariantError& e) {
    EXPECT_NE(std::string(e.what()).find("outstanding_cap"), std::string::npos) << e.what();
  }
}

TEST(HopperMergeableCap, ACapBelowOneLineIsAConfigError) {
  proto::Configure c = make_config(three_gpus(isa::RED_CAIS), 3, true);
  auto& m = *c.mutable_params();
  m["net.features"].set_s("cais_merge");
  m["net.cais_merge.outstanding_cap"].set_b(true);
  m["net.cais_merge.outstanding_cap_kb"].set_d(0.1);  // 102 B < one 128 B line
  expect_config_error(c, "gpu.max_packet_bytes");
}

}  // namespace
}  // namespace cais::gpu::test
