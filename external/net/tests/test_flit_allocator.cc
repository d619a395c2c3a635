// The flit-level separable input-first allocator (BookSim2's rules, see flit_allocator.h).
#include <gtest/gtest.h>

#include "cais/net/flit_allocator.h"

namespace cais::net {
namespace {

TEST(FlitAllocator, OutputAlternatesBetweenInputsPerFlit) {
  FlitAllocator a;
  a.init(4, 4, 3);
  std::vector<FlitGrant> g;
  std::vector<std::uint32_t> winners;
  for (int cycle = 0; cycle < 4; ++cycle) {  // inputs 0 and 2 both stream to output 1
    a.request(0, 0, 1);
    a.request(2, 1, 1);
    g.clear();
    a.allocate(g);
    ASSERT_EQ(g.size(), 1u);
    EXPECT_EQ(g[0].out, 1u);
    winners.push_back(g[0].in);
  }
  EXPECT_EQ(winners, (std::vector<std::uint32_t>{0, 2, 0, 2}));  // interleaved, not whole packets
}

TEST(FlitAllocator, InputArbiterPicksOneOutputAndMovesOnlyOnGrant) {
  FlitAllocator a;
  a.init(3, 3, 2);
  std::vector<FlitGrant> g;
  // Input 0 requests outputs 0 (vc 0) and 1 (vc 1); input 1 requests output 0.
  a.request(0, 0, 0);
  a.request(0, 1, 1);
  a.request(1, 0, 0);
  a.allocate(g);
  // Input 0 picks output 0 (pointer 0) and wins it (output pointer 0): input 1 loses, output 1 idles.
  ASSERT_EQ(g.size(), 1u);
  EXPECT_EQ(g[0].in, 0u);
  EXPECT_EQ(g[0].out, 0u);
  EXPECT_EQ(a.input_pointer(0), 1u);
  EXPECT_EQ(a.input_pointer(1), 0u);  // the loser's arbiter did not move
  g.clear();
  a.request(0, 0, 0);
  a.request(0, 1, 1);
  a.request(1, 0, 0);
  a.allocate(g);  // now input 0 prefers output 1 and input 1 gets output 0: both move
  ASSERT_EQ(g.size(), 2u);
}

TEST(FlitAllocator, VcNearestThePointerRepresentsTheInput) {
  FlitAllocator a;
  a.init(2, 2, 4);
  std::vector<FlitGrant> g;
  a.request(0, 3, 1);
  a.request(0, 1, 1);
  a.allocate(g);
  EXPECT_EQ(g.at(0).vc, 1u);  // pointer 0: vc 1 before vc 3
  g.clear();
  a.request(0, 3, 1);
  a.request(0, 1, 1);
  a.allocate(g);
  EXPECT_EQ(g.at(0).vc, 3u);  // pointer moved past vc 1
}

}  // namespace
}  // namespace cais::net
