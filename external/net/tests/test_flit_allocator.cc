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

// request_vcs (one call for an input's VCs to one output, as the router's tick files them) keeps
// what one request per VC keeps: over random cycles of requests two allocators grant the same.
TEST(FlitAllocator, OneRequestForSeveralVcsGrantsAsOneRequestPerVc) {
  constexpr std::uint32_t kIn = 6, kOut = 5, kVcs = 33;
  FlitAllocator per_vc, masked;
  per_vc.init(kIn, kOut, kVcs);
  masked.init(kIn, kOut, kVcs);
  std::uint64_t rng = 12345;
  auto next = [&rng] { rng = rng * 6364136223846793005ull + 1442695040888963407ull; return rng >> 33; };
  std::size_t granted = 0;
  for (int cycle = 0; cycle < 2000; ++cycle) {
    for (std::uint32_t in = 0; in < kIn; ++in)
      for (std::uint32_t out = 0; out < kOut; ++out) {
        if (next() % 3) continue;
        std::uint64_t vcs = 0;
        for (std::uint32_t vc = 0; vc < kVcs; ++vc)
          if (next() % 4 == 0) vcs |= 1ull << vc;
        if (!vcs) continue;
        for (std::uint64_t m = vcs; m; m &= m - 1) per_vc.request(in, static_cast<std::uint32_t>(__builtin_ctzll(m)), out);
        masked.request_vcs(in, vcs, out);
      }
    std::vector<FlitGrant> a, b;
    per_vc.allocate(a);
    masked.allocate(b);
    ASSERT_EQ(a.size(), b.size()) << "cycle " << cycle;
    for (std::size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(a[i].in, b[i].in);
      EXPECT_EQ(a[i].vc, b[i].vc);
      EXPECT_EQ(a[i].out, b[i].out);
    }
    granted += a.size();
  }
  EXPECT_GT(granted, 2000u);  // the cycles did contend and grant
}

// VC allocation: two heads whose input-VC arbiters point at the same free output VC collide;
// one wins, the other gets nothing this cycle (BookSim's separable allocator), although another
// output VC is free. Next cycle the loser's pick moves on only if it is asked again.
TEST(SeparableVcAllocator, HeadsPickingTheSameVcCollideAndTheLoserRetries) {
  SeparableVcAllocator a;
  a.init(/*input_queues=*/4, /*outputs=*/2, /*vcs=*/2);
  std::vector<std::pair<std::uint32_t, std::uint32_t>> g;
  a.request(0, 1, 0b11);  // input queues 0 and 2 both want output 1, whose VCs 0 and 1 are free
  a.request(2, 1, 0b11);
  a.allocate(g);
  ASSERT_EQ(g.size(), 1u);  // both picked output VC 2 (= 1 * 2 + 0): one grant only
  EXPECT_EQ(g[0], std::make_pair(0u, 2u));
  g.clear();
  a.request(2, 1, 0b10);  // VC 0 is now held: the loser asks for VC 1 and gets it
  a.allocate(g);
  ASSERT_EQ(g.size(), 1u);
  EXPECT_EQ(g[0], std::make_pair(2u, 3u));
  g.clear();
  // Output VC 2's arbiter moved past queue 0: with both asking for it again, queue 2 wins.
  a.request(0, 1, 0b01);
  a.request(2, 1, 0b01);
  a.allocate(g);
  ASSERT_EQ(g.size(), 1u);
  EXPECT_EQ(g[0].first, 2u);
}

// An input-VC arbiter starts after the VC it was last granted, wrapping over all outputs' VCs.
TEST(SeparableVcAllocator, InputPointerMovesPastTheGrantedVc) {
  SeparableVcAllocator a;
  a.init(2, 2, 4);
  std::vector<std::pair<std::uint32_t, std::uint32_t>> g;
  a.request(0, 0, 0b0110);
  a.allocate(g);
  EXPECT_EQ(g.at(0).second, 1u);  // pointer 0: VC 1 of output 0
  g.clear();
  a.request(0, 0, 0b0110);
  a.allocate(g);
  EXPECT_EQ(g.at(0).second, 2u);  // pointer 2
  g.clear();
  a.request(0, 0, 0b0011);
  a.allocate(g);
  EXPECT_EQ(g.at(0).second, 0u);  // pointer 3: nothing at or after it in output 0, wraps to VC 0
}

}  // namespace
}  // namespace cais::net
