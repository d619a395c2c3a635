// Direct credits (cais/deferred_credits.h): the ordered FIFO of deferred returns, and an
// OutputChannel whose credits land exactly where their credit packets would have.
#include <gtest/gtest.h>

#include <vector>

#include "cais/deferred_credits.h"
#include "cais/errors.h"
#include "cais/link.h"
#include "cais/sim.h"
#include "two_node_link.h"

namespace cais {
namespace {

TEST(DeferredCredits, KeepsTimeThenKeyOrderThroughGrowthAndWrap) {
  DeferredCredits q;
  // In order, with pops in between so that the ring wraps while it grows.
  std::uint64_t key = 10;
  for (TimePs t = 1; t <= 3; ++t) q.push({t * 100, key++, 0, 1, false});
  q.pop_front();
  for (TimePs t = 4; t <= 12; ++t) q.push({t * 100, key++, 0, 1, false});
  ASSERT_EQ(q.size(), 11u);
  for (std::size_t i = 0; i + 1 < q.size(); ++i)
    EXPECT_TRUE(before(q.at(i).at, q.at(i).key, q.at(i + 1).at, q.at(i + 1).key)) << i;
  EXPECT_EQ(q.front().at, 200u);
  // Out of order: same time, smaller key; and an earlier time.
  q.push({1200, 5, 1, 2, false});
  q.push({250, 99, 1, 3, false});
  EXPECT_EQ(q.at(1).at, 250u);
  EXPECT_EQ(q.at(1).flits, 3u);
  EXPECT_EQ(q.at(q.size() - 2).key, 5u);  // before (1200, key 20)
  EXPECT_EQ(q.back().at, 1200u);
  EXPECT_EQ(q.first_from(251), 2u);
  EXPECT_EQ(q.first_from(5000), q.size());
  std::size_t n = 0;
  while (!q.empty()) {
    q.pop_front();
    ++n;
  }
  EXPECT_EQ(n, 13u);
}

// Records the credits of channel 0 it sees in each event (kind 7: a wake).
struct Probe : NodeComponent {
  Probe(Sim& sim, std::uint32_t node) : NodeComponent(sim, "probe", node << 8) {}
  void handle(const Event& e) override {
    if (e.kind == kPacketArrival) {
      sim_.packets().release(static_cast<PacketHandle>(e.arg));
      return;
    }
    if (e.kind == 5) return sim_.push(Event{e.time, e.arg, this, 6, 0, 0});  // for now, key e.arg; reads nothing
    seen.push_back({e.time, e.kind, ch->credits(0)});
  }
  bool done() const override { return true; }
  struct Seen {
    TimePs t;
    std::uint32_t kind, credits;
  };
  OutputChannel* ch = nullptr;
  std::vector<Seen> seen;
};

struct TwoNodes {
  Sim sim;
  std::unique_ptr<Probe> a, b;
  OutputChannel ch;
  TwoNodes() {
    sim.configure(two_node_link({0, 0}));
    a = std::make_unique<Probe>(sim, 0);
    b = std::make_unique<Probe>(sim, 1);
    sim.attach_node(0, a.get());
    sim.attach_node(1, b.get());
    ch.init(sim.node(0).out[0], 1, 4, 16, 1000000);
    ch.enable_direct_credits(sim, *a, 7, 0);
    a->ch = &ch;
    b->ch = &ch;
  }
  void send_packet() {  // takes 4 credits of VC 0
    const PacketHandle h = sim.new_packet(*a);
    sim.packets()[h].flits = 4;
    ch.transmit(sim, *a, h, 0);
  }
};

TEST(DirectCredits, LandAtTheTimeAndOrderOfTheirPacketAndWakeOnlyWhenAsked) {
  TwoNodes n;
  n.send_packet();
  EXPECT_EQ(n.ch.credits(0), 0u);
  // The return is due at (5000, key of b's 10th event); events of b just before and after it.
  const std::uint64_t k = (std::uint64_t{1} << 8 << 40) | 10;
  n.ch.defer_return(5000, k, 0, 4);
  n.sim.push(Event{5000, k - 1, n.b.get(), 1, 0, 0});
  n.sim.push(Event{5000, k + 1, n.b.get(), 2, 0, 0});
  n.sim.push(Event{4999, 1, n.b.get(), 3, 0, 0});
  n.sim.run_until(kNever);
  ASSERT_EQ(n.b->seen.size(), 3u);
  EXPECT_EQ(n.b->seen[0].credits, 0u);  // 4999
  EXPECT_EQ(n.b->seen[1].credits, 0u);  // (5000, k - 1): before the credit
  EXPECT_EQ(n.b->seen[2].credits, 4u);  // (5000, k + 1): after it
  EXPECT_TRUE(n.a->seen.empty());       // nobody asked: no event for the credit
  EXPECT_TRUE(n.ch.all_credits_home());
}

// An event scheduled for now runs after every queued event of now, whatever its key: the credit
// packet's arrival, queued since the return was filed, has run by then, so its credits are in.
TEST(DirectCredits, AnEventScheduledForNowWithASmallerKeySeesTheCreditsOfTheQueuedOnesBeforeIt) {
  TwoNodes n;
  n.send_packet();
  const std::uint64_t k = (std::uint64_t{1} << 8 << 40) | 10;
  n.ch.defer_return(5000, k, 0, 4);
  n.sim.push(Event{5000, k + 1, n.b.get(), 5, 0, k - 1});  // schedules (5000, k - 1) when it runs
  n.sim.run_until(kNever);
  ASSERT_EQ(n.b->seen.size(), 1u);
  EXPECT_EQ(n.b->seen[0].kind, 6u);
  EXPECT_EQ(n.b->seen[0].credits, 4u);  // the event's key is below the credit's: it is in all the same
  EXPECT_EQ(n.sim.passed_key(), k + 1);
  EXPECT_TRUE(n.ch.all_credits_home());
}

TEST(DirectCredits, AnArmedReturnWakesItsOwnerWithTheCreditsIn) {
  TwoNodes n;
  n.send_packet();
  n.sim.run_until(kNever);
  const TimePs now = n.sim.now();
  n.ch.defer_return(now + 100, 1, 0, 2);
  n.ch.defer_return(now + 200, 2, 0, 2);
  n.ch.want_wake(now + 150);  // the owner acts only on a credit at or after now + 150
  n.sim.run_until(kNever);
  ASSERT_EQ(n.a->seen.size(), 1u);
  EXPECT_EQ(n.a->seen[0].t, now + 200);
  EXPECT_EQ(n.a->seen[0].kind, 7u);
  EXPECT_EQ(n.a->seen[0].credits, 4u);
  // Filed while the owner asks: armed at once; after no_wake: not.
  n.send_packet();
  n.sim.run_until(kNever);
  n.ch.want_wake(0);
  n.ch.defer_return(n.sim.now() + 10, 3, 0, 1);
  n.ch.no_wake();
  n.ch.defer_return(n.sim.now() + 20, 4, 0, 3);
  n.sim.run_until(kNever);
  ASSERT_EQ(n.a->seen.size(), 2u);
  EXPECT_EQ(n.a->seen[1].credits, 1u);
  EXPECT_TRUE(n.ch.all_credits_home());
}

TEST(DirectCredits, ReturnsDueAtOnceOrOverTheDepthAreRejected) {
  TwoNodes n;
  EXPECT_THROW(n.ch.defer_return(0, 1, 0, 1), InvariantError);  // not ahead of now
  n.ch.defer_return(10, 1, 0, 1);                                // all 4 credits are home
  n.sim.push(Event{20, 1, n.b.get(), 1, 0, 0});
  EXPECT_THROW(n.sim.run_until(kNever), InvariantError);
}

}  // namespace
}  // namespace cais
