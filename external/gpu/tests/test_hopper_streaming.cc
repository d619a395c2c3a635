// One GPU streaming remote writes to another through the NVSwitch router at the harness's
// default network parameters (8 VCs of 256 flits per NVLink lane, the paper's): the GPU's link
// and the switch's link to the receiver stay >= 95 % busy in wire bytes (headers included), so
// credits do not limit them. With the same 256 flits per VC for the whole 4-lane port (the old
// reading) credits do limit them, which is what this test guards against. Traffic control
// (CAIS) splits the request VCs into loads and reductions: each bulk class (reductions and
// stores; load responses) must still fill a link alone.
#include <gtest/gtest.h>

#include "hopper_test_util.h"

namespace cais::gpu {
namespace {
using namespace cais::gpu::test;

constexpr std::uint32_t kBlocks = 32;
constexpr std::uint32_t kBytesPerBlock = 256 * 1024;  // 8 MiB in all

struct Utilisation {
  double gpu_link = 0, switch_link = 0;
  double bulk_lines = 0;  // lines per bulk packet the SMs used (gpu.bulk_lines as capped)
};

// GPU 0 stores to GPU 1 (`op` ST_REMOTE) or loads from it (LD_REMOTE).
Utilisation stream(const std::string& scope, bool traffic_control = false, isa::Opcode op = isa::ST_REMOTE,
                   std::int64_t bulk_lines = 1) {
  isa::Workload wl = one_kernel(2, kBlocks);
  wl.mutable_buffers(0)->set_bytes(static_cast<std::uint64_t>(kBlocks) * kBytesPerBlock);
  wl.mutable_launches(0)->add_gpus(0);
  const bool store = op == isa::ST_REMOTE;
  auto* st = store ? mem(wl, op, 1, kBytesPerBlock, 0, 0, 1) : mem(wl, op, kBytesPerBlock / 128, 128, 128, 0, 1);
  st->mutable_addr()->set_block_x(kBytesPerBlock);

  proto::Configure c = make_config(wl, 2, true);  // 2 GPUs, one 4-lane 100 GB/s port each, 250 ns
  set_gpu_defaults(c, kBlocks);
  use_nvswitch(c);
  auto& m = *c.mutable_params();
  m["gpu.max_outstanding_per_sm"].set_i(256);
  m["net.vc_buffer_scope"].set_s(scope);
  m["net.traffic_control"].set_b(traffic_control);
  m["net.functional"].set_b(false);
  m["gpu.bulk_lines"].set_i(bulk_lines);
  HostedModel h;
  auto st_ = run_config(h, c);
  const auto& L = dynamic_cast<const HopperGpu&>(*h.nodes()[0]).launch_state(0);
  const double window_ps = static_cast<double>(L.end_ps - L.start_ps);
  const double bytes_per_ps = 100.0 / 1000.0;
  Utilisation u;
  u.bulk_lines = st_.at("gpu0.bulk_lines");
  if (store) {
    EXPECT_EQ(st_["gpu0.tx.WRITE.bytes"], static_cast<double>(kBlocks) * kBytesPerBlock);
    u.gpu_link = st_.at("gpu0.port0.tx.flits") * 16 / (bytes_per_ps * window_ps);
    u.switch_link = st_.at("probe.port1.tx.flits") * 16 / (bytes_per_ps * window_ps);
  } else {  // the responses: GPU 1's link up, the switch's link down to GPU 0
    EXPECT_EQ(st_["gpu1.tx.READ_RESP.bytes"], static_cast<double>(kBlocks) * kBytesPerBlock);
    u.gpu_link = st_.at("gpu1.port0.tx.flits") * 16 / (bytes_per_ps * window_ps);
    u.switch_link = st_.at("probe.port0.tx.flits") * 16 / (bytes_per_ps * window_ps);
  }
  return u;
}

TEST(HopperStreaming, RemoteWritesKeepTheLinksBusyAtThePapersVcBuffers) {
  const Utilisation u = stream("lane");
  EXPECT_GE(u.gpu_link, 0.95);
  EXPECT_GE(u.switch_link, 0.95);
  EXPECT_LE(u.gpu_link, 1.0);
}

TEST(HopperStreaming, TheSameDepthPerPortInsteadOfPerLaneIsCreditBound) {
  const Utilisation u = stream("port");
  EXPECT_LT(u.gpu_link, 0.8);
}

TEST(HopperStreaming, UnderTrafficControlReductionsAndLoadResponsesEachFillALink) {
  for (const isa::Opcode op : {isa::ST_REMOTE, isa::LD_REMOTE}) {
    const Utilisation off = stream("lane", false, op), on = stream("lane", true, op);
    EXPECT_GE(on.gpu_link, 0.8) << isa::Opcode_Name(op);
    EXPECT_GE(on.switch_link, 0.8) << isa::Opcode_Name(op);
    EXPECT_GE(on.switch_link, 0.85 * off.switch_link) << isa::Opcode_Name(op);
    std::printf("%s: traffic control off %.3f / %.3f, on %.3f / %.3f\n", isa::Opcode_Name(op).c_str(), off.gpu_link,
                off.switch_link, on.gpu_link, on.switch_link);
  }
}

// Bulk packets (gpu.bulk_lines) take VC buffer for all their lines at once. Eight 9-flit lines
// fill a 256-flit VC with three bulks (216 flits, where single lines use 252), which leaves
// traffic control's three reduction VCs per lane (48 KiB of single lines on this 4-lane port)
// short of the 51 KB the link sends in a credit round trip; the packetizer therefore cuts bulks
// to 7 lines, which pack like single lines, and the stores fill the link within 2 % of
// single-line packets (a bulk's lines return their credits together, with its tail). Without
// the cut: 79.5 % of the link against 94.8 %. Without traffic control the request class's 16
// VCs hold the round trip's bytes in 8-line bulks too, and those stay.
TEST(HopperStreaming, BulkPacketsUnderTrafficControlFillTheLinkAsSingleLinesDo) {
  const Utilisation lines = stream("lane", true, isa::ST_REMOTE, 1), bulk = stream("lane", true, isa::ST_REMOTE, 8);
  std::printf("stores under traffic control: 1-line packets %.3f, 8-line bulks %.3f\n", lines.gpu_link, bulk.gpu_link);
  EXPECT_EQ(bulk.bulk_lines, 7);
  EXPECT_GE(bulk.gpu_link, 0.97 * lines.gpu_link);
  EXPECT_GE(bulk.switch_link, 0.97 * lines.switch_link);
  const Utilisation off = stream("lane", false, isa::ST_REMOTE, 8);
  EXPECT_EQ(off.bulk_lines, 8);
  EXPECT_GE(off.gpu_link, 0.95);
}

}  // namespace
}  // namespace cais::gpu
