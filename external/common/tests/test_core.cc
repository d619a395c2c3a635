// Unit tests of the shared core: event ordering, strict parameters, rings, serialisation.
#include <gtest/gtest.h>

#include <random>

#include "cais/errors.h"
#include "cais/event_queue.h"
#include "cais/link.h"
#include "cais/params.h"
#include "cais/routing.h"

namespace cais {
namespace {

TEST(EventQueue, PopsInTimeThenKeyOrder) {
  EventQueue q;
  std::mt19937_64 rng(1);
  std::vector<std::pair<TimePs, std::uint64_t>> items;
  for (int i = 0; i < 5000; ++i) {
    const TimePs t = rng() % 100;
    const std::uint64_t k = rng();
    items.emplace_back(t, k);
    q.push(Event{t, k, nullptr, 0, 0, 0});
  }
  std::sort(items.begin(), items.end());
  for (const auto& [t, k] : items) {
    const Event e = q.pop();
    ASSERT_EQ(e.time, t);
    ASSERT_EQ(e.key, k);
  }
  EXPECT_TRUE(q.empty());
  EXPECT_EQ(q.next_time(), kNever);
}

TEST(Params, MissingWrongTypeAndNegativeAreNamed) {
  Params p;
  p.set_int("net.vcs", 8);
  p.set_int("net.neg", -1);
  p.set_string("net.mode", "fast");
  EXPECT_EQ(p.get_int("net.vcs"), 8);
  try {
    p.get_int("net.missing");
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), "net.missing");
  }
  EXPECT_THROW(p.get_string("net.vcs"), ConfigError);
  EXPECT_THROW(p.get_uint("net.neg"), ConfigError);
  try {
    p.get_enum("net.mode", {"slow", "exact"});
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("slow, exact"), std::string::npos);
  }
}

TEST(Params, UnreadKeysUnderOwnedPrefixesAreRejected) {
  Params p;
  p.set_int("net.used", 1);
  p.set_int("net.typo", 2);
  p.set_int("gpu.other", 3);
  p.get_int("net.used");
  EXPECT_EQ(p.unread_keys({"net."}), std::vector<std::string>{"net.typo"});
  EXPECT_THROW(p.reject_unread({"net."}), ConfigError);
  p.ignore_prefix("net.typo");
  EXPECT_NO_THROW(p.reject_unread({"net."}));
}

TEST(VcLayout, APacketLargerThanAVcIsAConfigErrorNamingTheDepth) {
  VcLayout v;
  v.vcs = 8;
  v.flits = 9;
  EXPECT_NO_THROW(v.require_fits(9, "a line"));
  try {
    v.require_fits(10, "a line of gpu.max_packet_bytes=144");
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), "net.vc_depth_flits");
    EXPECT_NE(std::string(e.what()).find("is 9 flits but a line of gpu.max_packet_bytes=144 is 10 flits"),
              std::string::npos) << e.what();
  }
}

TEST(HandleRing, FifoAndOverflow) {
  HandleRing r;
  r.init(3);
  r.push(1);
  r.push(2);
  r.push(3);
  EXPECT_TRUE(r.full());
  EXPECT_THROW(r.push(4), InvariantError);
  EXPECT_EQ(r.pop(), 1u);
  r.push(4);
  EXPECT_EQ(r.pop(), 2u);
  EXPECT_EQ(r.pop(), 3u);
  EXPECT_EQ(r.pop(), 4u);
  EXPECT_TRUE(r.empty());
}

TEST(Time, SerialisationRoundsUp) {
  // 144 B (9 flits) at 25 GB/s = 5.76 ns
  EXPECT_EQ(serialization_ps(144, 25.0), 5760u);
  EXPECT_EQ(serialization_ps(16, 3.0), 5334u);  // 5333.33 -> 5334: never faster than configured
  EXPECT_EQ(flits_for(128, 16, 1), 9u);
  EXPECT_EQ(flits_for(0, 16, 1), 1u);
  EXPECT_EQ(flits_for(1, 16, 1), 2u);
}

TEST(PlaneHash, ProportionalToLanesAndDeterministic) {
  PlaneHash h({5, 4, 4, 5}, 128);
  std::vector<int> counts(4, 0);
  for (std::uint64_t a = 0; a < 180000; ++a) counts[h.plane(a * 128)]++;
  EXPECT_NEAR(counts[0] / 180000.0, 5.0 / 18, 0.01);
  EXPECT_NEAR(counts[1] / 180000.0, 4.0 / 18, 0.01);
  EXPECT_EQ(h.plane(12345 * 128), h.plane(12345 * 128 + 127));  // one granule, one plane
}

}  // namespace
}  // namespace cais

namespace cais {
namespace {
TEST(Histogram, QuantilesWithinFourPercent) {
  Histogram h;
  for (int i = 1; i <= 10000; ++i) h.add(static_cast<double>(i));
  EXPECT_EQ(h.count(), 10000u);
  EXPECT_DOUBLE_EQ(h.mean(), 5000.5);
  EXPECT_NEAR(h.quantile(0.5), 5000, 5000 * 0.04);
  EXPECT_NEAR(h.quantile(0.99), 9900, 9900 * 0.04);
  EXPECT_EQ(h.min(), 1);
  EXPECT_EQ(h.max(), 10000);
}
}  // namespace
}  // namespace cais
