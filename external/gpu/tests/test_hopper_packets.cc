// Packet sizes of the Hopper GPU: gpu.max_packet_bytes up to the 64 sectors of the packetizer's
// sector mask move every byte; larger or unaligned sizes are configuration errors.
#include <gtest/gtest.h>

#include "hopper_test_util.h"

namespace cais::gpu {
namespace {
using namespace cais::gpu::test;

TEST(HopperPackets, TheLargestPacketOf2048BytesCarriesAllItsSectors) {
  auto wl = one_kernel(2, 1, true);
  wl.mutable_launches(0)->add_gpus(0);
  mem(wl, isa::ST_REMOTE, 1, 4096 + 96, 0, 0, 1)->set_value(2);
  seen().clear();
  HostedModel m;
  auto c = make_config(wl, 2, true);
  (*c.mutable_params())["gpu.max_packet_bytes"].set_i(2048);
  m.configure(c);
  m.sim().run_until(kNever);
  ASSERT_TRUE(m.done()) << m.blocked_reason();
  ASSERT_EQ(seen().size(), 3u);  // 2048 + 2048 + 96 B
  std::uint64_t bytes = 0;
  for (const auto& s : seen()) {
    bytes += s.payload;
    EXPECT_EQ(s.values.size(), s.payload / 4);
  }
  EXPECT_EQ(seen()[0].payload, 2048u);
  EXPECT_EQ(bytes, 4096u + 96u);
}

TEST(HopperPackets, PacketsAbove2048BytesOrOffTheSectorAreConfigErrorsNamingTheKey) {
  for (std::int64_t bad : {4096, 2080, 100, 0}) {
    auto wl = one_kernel(2);
    add(wl, isa::BAR);
    HostedModel m;
    auto c = make_config(wl, 2, true);
    (*c.mutable_params())["gpu.max_packet_bytes"].set_i(bad);
    try {
      m.configure(c);
      FAIL() << "gpu.max_packet_bytes=" << bad << " accepted";
    } catch (const ConfigError& e) {
      EXPECT_EQ(e.key(), "gpu.max_packet_bytes");
      EXPECT_NE(std::string(e.what()).find("from 32 to 2048"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace cais::gpu
