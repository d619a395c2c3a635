// RecycledNodes (feature_util.h): a table's erased nodes serve its next inserts, each entry
// fresh, and the table holds exactly what a plain unordered_map would.
#include <gtest/gtest.h>

#include <random>
#include <unordered_map>
#include <vector>

#include "cais/net/feature_util.h"

namespace cais::net {
namespace {

struct Wait {
  std::uint32_t remaining = 7;
  std::vector<double> sum;
};

TEST(RecycledNodes, ReusedNodesHoldFreshEntriesAndTheTableMatchesAPlainMap) {
  using Table = std::unordered_map<std::uint64_t, Wait>;
  Table table;
  std::unordered_map<std::uint64_t, std::uint32_t> plain;
  RecycledNodes<Table> nodes;
  std::mt19937_64 rng(5);
  std::uint64_t next = 0;
  for (int step = 0; step < 20000; ++step) {
    if (table.empty() || rng() % 3) {
      Wait& w = nodes.insert(table, next);
      ASSERT_EQ(w.remaining, 7u);  // a fresh entry, whatever the node held before
      ASSERT_TRUE(w.sum.empty());
      w.remaining = static_cast<std::uint32_t>(next % 1000);
      w.sum.assign(3, 1.0);
      plain[next] = w.remaining;
      ++next;
    } else {
      auto it = table.begin();
      std::advance(it, static_cast<long>(rng() % table.size()));
      ASSERT_EQ(plain.at(it->first), it->second.remaining);
      plain.erase(it->first);
      nodes.erase(table, it);
    }
    ASSERT_EQ(table.size(), plain.size());
  }
  for (const auto& [k, v] : plain) EXPECT_EQ(table.at(k).remaining, v);
}

}  // namespace
}  // namespace cais::net
