// Egress arbitration of a GPU's NVLink port (gpu.egress_arbitration): two SMs that post a tile
// of red.cais lines at the same moment share the port one packet each in turn (round_robin),
// as the SM-to-hub crossbar shares it; `fifo` sends the first SM's tile whole before the next.
#include <gtest/gtest.h>

#include "hopper_test_util.h"

namespace cais::gpu::test {
namespace {

constexpr std::uint32_t kLines = 8;
constexpr std::uint64_t kTileBytes = 8192;  // block b's tile at b x kTileBytes on GPU 1

// GPU 0 of two runs two blocks (one per SM); each posts kLines contiguous 128 B red.cais lines.
std::vector<std::uint32_t> block_of_each_packet(const std::string& arbitration) {
  auto wl = one_kernel(2, 2);
  wl.mutable_launches(0)->add_gpus(0);
  auto* red = mem(wl, isa::RED_CAIS, kLines, 128, 128, 0, 1);
  red->mutable_addr()->set_block_x(kTileBytes);
  seen().clear();
  proto::Configure c = make_config(wl, 2, true);
  (*c.mutable_params())["gpu.egress_arbitration"].set_s(arbitration);
  HostedModel m;
  run_config(m, c);
  std::vector<std::uint32_t> blocks;
  for (const auto& s : seen()) blocks.push_back(static_cast<std::uint32_t>((s.addr - unicast_addr(1, 0)) / kTileBytes));
  return blocks;
}

TEST(HopperEgress, RoundRobinInterleavesTheTilesOfTwoSmsLineByLine) {
  const auto blocks = block_of_each_packet("round_robin");
  ASSERT_EQ(blocks.size(), 2 * kLines);
  // Block 0's first line finds the port idle and leaves alone; from then on one each in turn.
  int lead = 0;  // block 0's packets minus block 1's so far
  for (std::uint32_t i = 0; i < blocks.size(); ++i) {
    lead += blocks[i] == 0 ? 1 : -1;
    EXPECT_GE(lead, 0) << "packet " << i;
    EXPECT_LE(lead, 2) << "packet " << i;
  }
}

TEST(HopperEgress, FifoSendsTheFirstSmsTileWholeBeforeTheSecond) {
  const auto blocks = block_of_each_packet("fifo");
  ASSERT_EQ(blocks.size(), 2 * kLines);
  for (std::uint32_t i = 0; i < blocks.size(); ++i) EXPECT_EQ(blocks[i], i / kLines) << "packet " << i;
}

TEST(HopperEgress, AnUnknownArbitrationIsAConfigErrorNamingTheKey) {
  auto wl = one_kernel(2);
  add(wl, isa::BAR);
  proto::Configure c = make_config(wl, 2, true);
  (*c.mutable_params())["gpu.egress_arbitration"].set_s("lottery");
  HostedModel m;
  try {
    m.configure(c);
    FAIL() << "gpu.egress_arbitration=lottery accepted";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), "gpu.egress_arbitration");
    EXPECT_NE(std::string(e.what()).find("round_robin"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace cais::gpu::test
