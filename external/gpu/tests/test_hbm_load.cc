// HBM's loaded latency (hbm_load.h): the utilisation average, the curve, the write blend, and a
// read miss in LocalMemory that waits for it.
#include <gtest/gtest.h>

#include "cais/gpu/hbm_load.h"
#include "cais/gpu/hopper_config.h"
#include "cais/gpu/local_memory.h"
#include "hopper_test_util.h"

using namespace cais;
using namespace cais::gpu;
using cais::gpu::test::set_gpu_defaults;

namespace {

// Peak 1 B/ps; reads add 100 ps at half load and 300 at full, copies twice that; 1 us window.
HopperConfig loaded_config() {
  HopperConfig c;
  c.num_sms = 1;
  c.l2_bytes = 1 << 20;
  c.l2_bytes_per_ps = 100;
  c.sm_load_bytes_per_ps = 100;
  c.sm_store_bytes_per_ps = 100;
  c.hbm_bytes_per_ps = 1;
  c.hbm_peak_bytes_per_ps = 1;
  c.l2_latency_ps = 100;
  c.hbm_latency_ps = 400;
  c.hbm_load_util = {0.0, 0.5, 1.0};
  c.hbm_load_read_ps = {0, 100, 300};
  c.hbm_load_copy_ps = {0, 200, 600};
  c.hbm_load_window_ps = 1'000'000;
  return c;
}

// `bytes` every `gap` ps from `from` until `to`, reads or writes.
void stream(HbmLoad& h, TimePs from, TimePs to, TimePs gap, std::uint64_t bytes, bool write) {
  for (TimePs t = from; t < to; t += gap) h.account(t, bytes, write);
}

}  // namespace

TEST(HbmLoad, IdleHbmAddsNothing) {
  const HopperConfig c = loaded_config();
  HbmLoad h(c);
  EXPECT_EQ(h.extra_latency(0), 0);
  EXPECT_EQ(h.extra_latency(5'000'000), 0);
}

TEST(HbmLoad, SteadyReadsAtHalfThePeakAddTheReadCurvesValue) {
  const HopperConfig c = loaded_config();
  HbmLoad h(c);
  stream(h, 0, 20'000'000, 1000, 500, false);  // 0.5 B/ps for 20 windows
  EXPECT_NEAR(h.utilisation(20'000'000), 0.5, 0.01);
  EXPECT_NEAR(static_cast<double>(h.extra_latency(20'000'000)), 100.0, 3.0);
}

TEST(HbmLoad, HalfWritesAddTheCopyCurvesValueAndAllWritesNoMore) {
  const HopperConfig c = loaded_config();
  HbmLoad copy(c), writes(c);
  for (TimePs t = 0; t < 20'000'000; t += 1000) {  // in time order, as the engine accounts
    copy.account(t, 250, false);
    copy.account(t + 500, 250, true);
  }
  EXPECT_NEAR(copy.write_share(), 0.5, 0.01);
  EXPECT_NEAR(static_cast<double>(copy.extra_latency(20'000'000)), 200.0, 5.0);
  stream(writes, 0, 20'000'000, 1000, 500, true);
  EXPECT_NEAR(static_cast<double>(writes.extra_latency(20'000'000)), 200.0, 5.0);
}

TEST(HbmLoad, TheLoadFadesWithinAFewWindowsOfTheTrafficStopping) {
  const HopperConfig c = loaded_config();
  HbmLoad h(c);
  stream(h, 0, 20'000'000, 1000, 1000, false);  // saturated
  EXPECT_NEAR(static_cast<double>(h.extra_latency(20'000'000)), 300.0, 5.0);  // beyond the last point: held
  EXPECT_LT(h.extra_latency(21'000'000), 150);  // one window later: e^-1 of the load
  EXPECT_EQ(h.extra_latency(40'000'000), 0);
}

TEST(HbmLoad, AReadMissUnderLoadWaitsTheExtraLatencyAndAnL2HitDoesNot) {
  const HopperConfig c = loaded_config();
  LocalMemory idle(c), busy(c);
  EXPECT_EQ(idle.access(0, 0, 1, 100, false), 100 + 400 + 100);  // HBM serves 100 B in 100 ps
  for (std::uint64_t k = 0; k < 20'000; ++k) busy.remote_write(k * 1000, 500);  // half load, writes
  const TimePs now = 20'000'000;
  const TimePs extra = busy.hbm_load().extra_latency(now);
  EXPECT_NEAR(static_cast<double>(extra), 200.0, 5.0);
  EXPECT_EQ(busy.access(now, 0, 1, 100, false), now + 100 + 400 + extra + 100);
  EXPECT_EQ(busy.access(now + 10'000, 0, 1, 100, false), now + 10'000 + 1 + 100);  // L2 hit: port and L2 only
}

TEST(HopperConfig, ABadLoadedLatencyCurveIsRefusedByName) {
  auto config_error = [](auto edit) -> std::string {
    proto::Configure cfg;
    set_gpu_defaults(cfg);
    edit(*cfg.mutable_params());
    try {
      HopperConfig::from_params(Params(cfg.params()));
    } catch (const ConfigError& e) {
      return e.what();
    }
    return "";
  };
  auto add = [](proto::ParamValue& v, double x) { v.mutable_list()->add_items()->set_d(x); };
  EXPECT_EQ(config_error([](auto&) {}), "");
  EXPECT_NE(config_error([&](auto& m) { add(m["gpu.hbm_load_util"], 0.5); }).find("gpu.hbm_load_read_ns"),
            std::string::npos);  // two utilisations, one latency each
  EXPECT_NE(config_error([&](auto& m) {
              for (const char* k : {"gpu.hbm_load_util", "gpu.hbm_load_read_ns", "gpu.hbm_load_copy_ns"}) add(m[k], 0.0);
            }).find("strictly rising"),
            std::string::npos);
  EXPECT_NE(config_error([](auto& m) { m["gpu.hbm_load_copy_ns"].mutable_list()->mutable_items(0)->set_d(-1); })
                .find(">= 0"),
            std::string::npos);
}
