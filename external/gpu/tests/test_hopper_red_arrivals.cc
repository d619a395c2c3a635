// Home-side completion of red.cais (red_arrivals.h): 8 Hopper GPUs reduce into GPU 0 through
// the NVSwitch router, with the merge unit off, on, and on with a table so small that entries
// are evicted and time out. GPU 0's consumer blocks wait on the per-region arrival flags and
// then load their region: the flags must end at exactly (N-1) x region bytes, and what the
// consumers load must be the complete sums (a flag raised before the last contribution landed
// would let a consumer read a partial sum).
#include <gtest/gtest.h>

#include "hopper_test_util.h"

namespace cais::gpu::test {
namespace {

constexpr std::uint32_t kGpus = 8, kRegions = 8, kRegionBytes = 1024;
constexpr std::uint32_t kC = 0, kFlags = 2;  // buffers: X (C), MC, FLAGS

// Producer on every GPU: block b red.cais its region b to GPU 0 (value = rank + 1 per element;
// GPU 0's own is local). Consumer on GPU 0: block b waits for (N-1) x region bytes on flag b,
// after its local producer block (dependency), then loads region b.
isa::Workload reduce_into_gpu0(isa::Opcode red_op = isa::RED_CAIS) {
  isa::Workload wl = one_kernel(kGpus, kRegions, true);
  auto* c = wl.mutable_buffers(kC);
  c->set_bytes(kRegions * kRegionBytes);
  c->set_arrival_region_bytes(kRegionBytes);
  c->set_arrival_flag_buffer(kFlags);
  auto* f = wl.add_buffers();
  f->set_name("FLAGS");
  f->set_bytes(8 * kRegions);
  f->set_dtype(isa::FP32);
  auto* red = mem(wl, red_op, 1, kRegionBytes, 0, 0, 0);
  red->mutable_addr()->set_block_x(kRegionBytes);
  add(wl, isa::BAR);
  auto* k = add_kernel(wl, "consumer", kRegions);
  auto* wait = k->add_program();
  wait->set_op(isa::FLAG_WAIT);
  wait->set_buffer(kFlags);
  wait->mutable_addr()->set_block_x(8);
  wait->set_value(static_cast<std::int64_t>(kGpus - 1) * kRegionBytes);
  auto* ld = k->add_program();
  ld->set_op(isa::LD);
  ld->set_buffer(kC);
  ld->set_rows(1);
  ld->set_row_bytes(kRegionBytes);
  ld->mutable_addr()->set_block_x(kRegionBytes);
  auto* la = wl.add_launches();
  la->set_kernel(1);
  la->add_gpus(0);
  la->set_stream(1);
  auto* dep = la->add_deps();
  dep->set_producer(0);
  dep->set_scale_num(1);
  dep->set_scale_den(1);
  return wl;
}

struct MergeTable {
  bool on = false;
  std::int64_t entries = 320;
  double timeout_ns = 5000;
  double launch_skew_ns = 0;  // GPUs start apart: contributions to a line arrive spread out
  double cap_kb = 0;          // > 0: net.cais_merge.outstanding_cap at this many KB
};

proto::Configure config(const isa::Workload& wl, const MergeTable& t) {
  proto::Configure c = make_config(wl, kGpus, true);
  use_nvswitch(c, t.on ? "cais_merge" : "");
  (*c.mutable_params())["gpu.launch_skew_ns"].set_d(t.launch_skew_ns);
  if (t.on) {
    auto& m = *c.mutable_params();
    m["net.cais_merge.table_bytes"].set_i(40960);
    m["net.cais_merge.table_entries"].set_i(t.entries);
    m["net.cais_merge.unlimited"].set_b(false);
    m["net.cais_merge.timeout_ns"].set_d(t.timeout_ns);
    m["net.cais_merge.lookup_delay_ns"].set_d(2.0);
    m["net.cais_merge.throttle"].set_b(false);
    m["net.cais_merge.throttle_ahead_entries"].set_i(64);
    m["net.cais_merge.throttle_resume_entries"].set_i(32);
    m["net.cais_merge.throttle_hold_ns"].set_d(2000.0);
    m["net.cais_merge.outstanding_cap"].set_b(t.cap_kb > 0);
    m["net.cais_merge.outstanding_cap_kb"].set_d(t.cap_kb > 0 ? t.cap_kb : 1280.0);
  }
  return c;
}

double merge_stat(const std::map<std::string, double>& st, const std::string& name) {
  double s = 0;
  for (const auto& kv : st)
    if (kv.first.find(".cais_merge.") != std::string::npos && kv.first.size() > name.size() + 1 &&
        kv.first.compare(kv.first.size() - name.size() - 1, name.size() + 1, "." + name) == 0)
      s += kv.second;
  return s;
}

std::map<std::string, double> run_and_check(const MergeTable& t, isa::Opcode red_op = isa::RED_CAIS) {
  const isa::Workload wl = reduce_into_gpu0(red_op);
  HostedModel h;
  const auto st = run_config(h, config(wl, t));
  const auto& gpu0 = *dynamic_cast<const HopperGpu*>(h.nodes()[0].get());
  const std::uint32_t elems = kRegionBytes / 4, lines = kRegions * kRegionBytes / 128;
  const double sum = kGpus * (kGpus + 1) / 2.0;  // 1 + 2 + ... + 8 per element
  for (std::uint32_t r = 0; r < kRegions; ++r)
    EXPECT_EQ(gpu0.flag_value(kFlags, 8 * r), (kGpus - 1) * kRegionBytes) << "region " << r;
  for (std::uint32_t e = 0; e < kRegions * elems; ++e) {
    EXPECT_EQ(gpu0.mem_value(kC, e), sum) << "element " << e;
    if (gpu0.mem_value(kC, e) != sum) break;
  }
  // Every consumer loaded its region after the flag: complete sums only.
  EXPECT_EQ(st.at("gpu0.ld_value_sum"), sum * kRegions * elems);
  EXPECT_EQ(st.at("gpu0.red_arrivals.contributions"), (kGpus - 1) * lines);
  EXPECT_GE(st.at("gpu0.red_arrivals.packets"), lines);
  EXPECT_EQ(st.at("gpu1.red_arrivals.packets"), 0);
  return st;
}

TEST(HopperRedArrivals, WithoutTheMergeUnitEveryContributionIsCounted) {
  const auto st = run_and_check(MergeTable{});
  EXPECT_EQ(st.at("gpu0.red_arrivals.packets"), (kGpus - 1) * kRegions * kRegionBytes / 128);
}

TEST(HopperRedArrivals, MergedSumsCountTheirContributions) {
  MergeTable t;
  t.on = true;
  const auto st = run_and_check(t);
  EXPECT_EQ(st.at("gpu0.red_arrivals.packets"), kRegions * kRegionBytes / 128);  // one write per line
  EXPECT_EQ(merge_stat(st, "completions"), kRegions * kRegionBytes / 128);
}

TEST(HopperRedArrivals, EvictedPartialSumsCountWhatTheyCarry) {
  MergeTable t;
  t.on = true;
  t.entries = 2;
  t.timeout_ns = 200;
  t.launch_skew_ns = 3000;
  const auto st = run_and_check(t);
  EXPECT_GT(merge_stat(st, "partial_flushes"), 0);
  EXPECT_GT(merge_stat(st, "evictions"), 0);
  EXPECT_GT(merge_stat(st, "timeouts"), 0);
  EXPECT_GT(st.at("gpu0.red_arrivals.packets"), kRegions * kRegionBytes / 128);
}

// The per-GPU cap of outstanding mergeable lines (net.cais_merge.outstanding_cap): the switch
// acks every red.cais line it retires, so each sender gets exactly the lines it sent back and
// ends with none outstanding (check_drained), and the sums stay exact, also with a cap of a few
// lines that stalls the senders and a table that evicts and times out.
std::map<std::string, double> run_capped(const MergeTable& t) {
  const auto st = run_and_check(t);
  const double lines = kRegions * kRegionBytes / 128;  // each GPU's red.cais lines to GPU 0
  for (std::uint32_t g = 1; g < kGpus; ++g) {
    const std::string n = "gpu" + std::to_string(g);
    EXPECT_EQ(st.at(n + ".mergeable.red_ack_lines"), lines) << n;
    EXPECT_GE(st.at(n + ".mergeable.high_water_lines"), 1) << n;
  }
  EXPECT_EQ(st.at("gpu0.mergeable.red_ack_lines"), 0);  // the home's own contributions stay local
  EXPECT_EQ(merge_stat(st, "red_ack_lines"), (kGpus - 1) * lines);
  return st;
}

TEST(HopperRedArrivals, CappedRedCaisLinesAreAckedOnePerLineAndSumsStayExact) {
  MergeTable t;
  t.on = true;
  t.cap_kb = 1280;
  const auto st = run_capped(t);
  EXPECT_EQ(merge_stat(st, "completions"), kRegions * kRegionBytes / 128);
  EXPECT_EQ(st.at("gpu1.stall.mergeable_cap"), 0);  // 64 lines never reach 10240
  // One ack per contributor per merged entry: 7 GPUs x 64 single-line entries.
  EXPECT_EQ(merge_stat(st, "red_acks"), (kGpus - 1) * kRegions * kRegionBytes / 128);
}

TEST(HopperRedArrivals, ASmallCapStallsTheSendersWithoutDeadlockEvenWhenEntriesAreEvicted) {
  MergeTable t;
  t.on = true;
  t.cap_kb = 0.5;  // 4 lines of 128 B per GPU
  t.entries = 2;
  t.timeout_ns = 200;
  t.launch_skew_ns = 3000;
  const auto st = run_capped(t);
  EXPECT_GT(merge_stat(st, "evictions") + merge_stat(st, "timeouts"), 0);
  double stalls = 0, high = 0;
  for (std::uint32_t g = 1; g < kGpus; ++g) {
    stalls += st.at("gpu" + std::to_string(g) + ".stall.mergeable_cap");
    high = std::max(high, st.at("gpu" + std::to_string(g) + ".mergeable.high_water_lines"));
  }
  EXPECT_GT(stalls, 0);
  EXPECT_EQ(high, 4);  // the cap holds
}

TEST(HopperRedArrivals, TheCapNeedsTheMergeUnitToAckIt) {
  MergeTable t;
  t.on = true;
  t.cap_kb = 1280;
  proto::Configure c = config(reduce_into_gpu0(), t);
  (*c.mutable_params())["net.features"].set_s("");
  HostedModel h;
  try {
    h.configure(c);
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("cais_merge"), std::string::npos) << e.what();
  }
}

// A plain remote reduction (red.remote, the source form before the CAIS compiler) is added at the
// home and counted there, but never merged, even with the merge unit on: one packet per
// contribution reaches GPU 0 and the switch opens no entry.
TEST(HopperRedArrivals, PlainRemoteReductionsAreAddedAtTheHomeUnmerged) {
  MergeTable t;
  t.on = true;
  const auto st = run_and_check(t, isa::RED_REMOTE);
  EXPECT_EQ(st.at("gpu0.red_arrivals.packets"), (kGpus - 1) * kRegions * kRegionBytes / 128);
  EXPECT_EQ(merge_stat(st, "misses") + merge_stat(st, "hits") + merge_stat(st, "completions"), 0);
  EXPECT_EQ(st.at("gpu1.tx.CAIS_RED.packets"), kRegions * kRegionBytes / 128);  // GPU 1's own, posted
}

TEST(HopperRedArrivals, ARegionThatPacketsCouldStraddleIsAConfigError) {
  isa::Workload wl = reduce_into_gpu0();
  wl.mutable_buffers(kC)->set_arrival_region_bytes(1000);
  HostedModel h;
  try {
    h.configure(config(wl, MergeTable{}));
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("buffer 'X'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("gpu.max_packet_bytes"), std::string::npos) << e.what();
  }
  wl.mutable_buffers(kC)->set_arrival_region_bytes(128);  // 64 regions: the 64 B flag buffer holds 8 flags
  HostedModel h2;
  EXPECT_THROW(h2.configure(config(wl, MergeTable{})), ConfigError);
}

}  // namespace
}  // namespace cais::gpu::test
