// Dispatch order: keyed, reproducible drift draws (drift.h), the windowed order, and the
// row-interleaved rasterisation (tb_scheduler.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "cais/errors.h"
#include "cais/gpu/drift.h"
#include "cais/gpu/tb_scheduler.h"

namespace cais::gpu {
namespace {

TEST(DriftDraws, AValueDependsOnItsKeyNotOnTheOrderOfDraws) {
  Sim sim;
  DriftDraws a(sim, "gpu0"), b(sim, "gpu0"), other(sim, "gpu1");
  const double first = a.uniform(DriftSource::kBlockJitter, 3, 7);
  for (int i = 0; i < 100; ++i) (void)b.uniform(DriftSource::kBlockJitter, i, i);  // draws in between
  EXPECT_EQ(b.uniform(DriftSource::kBlockJitter, 3, 7), first);
  EXPECT_NE(other.uniform(DriftSource::kBlockJitter, 3, 7), first);        // another GPU
  EXPECT_NE(a.uniform(DriftSource::kLaunchSkew, 3, 7), first);             // another source
}

TEST(DriftDraws, UniformAndNormalHaveTheirMoments) {
  Sim sim;
  DriftDraws d(sim, "gpu3");
  const int n = 20000;
  double su = 0, sn = 0, sn2 = 0;
  for (int i = 0; i < n; ++i) {
    const double u = d.uniform(DriftSource::kTbOrder, 1, i);
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    su += u;
    const double z = d.normal(DriftSource::kClock, 1, i);
    sn += z;
    sn2 += z * z;
  }
  EXPECT_NEAR(su / n, 0.5, 0.01);
  EXPECT_NEAR(sn / n, 0.0, 0.03);
  EXPECT_NEAR(std::sqrt(sn2 / n), 1.0, 0.03);
}

TEST(WindowedOrder, IsAPermutationThatMovesEachBlockLessThanTheWindow) {
  Sim sim;
  DriftDraws d(sim, "gpu0");
  std::vector<std::uint32_t> raster(500);
  std::iota(raster.begin(), raster.end(), 0u);
  EXPECT_EQ(windowed_order(500, 1, d, 0), raster);
  for (std::uint32_t w : {2u, 8u, 40u}) {
    const auto o = windowed_order(500, w, d, 0);
    auto sorted = o;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(sorted, raster);
    std::uint32_t moved = 0, most = 0;
    for (std::uint32_t pos = 0; pos < o.size(); ++pos) {
      const std::uint32_t dist = o[pos] > pos ? o[pos] - pos : pos - o[pos];
      most = std::max(most, dist);
      moved += o[pos] != pos;
    }
    EXPECT_LT(most, w) << "window " << w;
    EXPECT_GT(moved, 0u) << "window " << w;
  }
  EXPECT_NE(windowed_order(500, 8, d, 0), windowed_order(500, 8, d, 1));  // per launch
}

TEST(InterleavedRows, HandsOutRowBlockROfEveryGroupBeforeRPlusOne) {
  // 2 columns, 4 rows in 2 groups (rows 0-1, rows 2-3): rows go 0, 2, 1, 3.
  EXPECT_EQ(interleaved_rows(2, 4, 2, "k"), (std::vector<std::uint32_t>{0, 1, 4, 5, 2, 3, 6, 7}));
  EXPECT_EQ(interleaved_rows(1, 3, 1, "k"), (std::vector<std::uint32_t>{0, 1, 2}));
  EXPECT_THROW(interleaved_rows(1, 6, 4, "k"), ConfigError);
}

TEST(InterleavedRows, BlockInterleaveGivesEveryGroupOneBlockInEachStretchOfGroups) {
  // 2 columns, 4 rows in 2 groups (rows 0-1, rows 2-3): (row 0, bx 0), (row 2, bx 0), (row 0, bx 1),
  // (row 2, bx 1), then rows 1 and 3 the same way.
  EXPECT_EQ(interleaved_rows(2, 4, 2, "k", true), (std::vector<std::uint32_t>{0, 4, 1, 5, 2, 6, 3, 7}));
  const auto order = interleaved_rows(16, 24, 8, "k", true);  // a wave of any 8 consecutive blocks: all 8 groups
  for (std::size_t s = 0; s + 8 <= order.size(); s += 8) {
    std::vector<bool> seen(8, false);
    for (std::size_t i = s; i < s + 8; ++i) seen[order[i] / 16 / 3] = true;
    EXPECT_EQ(std::count(seen.begin(), seen.end(), true), 8) << "stretch " << s;
  }
  std::vector<std::uint32_t> sorted = order;
  std::sort(sorted.begin(), sorted.end());
  for (std::uint32_t i = 0; i < sorted.size(); ++i) ASSERT_EQ(sorted[i], i);  // a permutation
  EXPECT_THROW(interleaved_rows(1, 6, 4, "k", true), ConfigError);
}

}  // namespace
}  // namespace cais::gpu
