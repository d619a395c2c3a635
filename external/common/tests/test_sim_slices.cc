// Sim::run_until with an event budget: a lone engine runs in slices of events (the harness's
// Advance.max_events), and stopping between any two events must continue exactly.
#include <gtest/gtest.h>

#include <cstdint>
#include <tuple>
#include <vector>

#include "cais/sim.h"
#include "two_node_link.h"

namespace cais {
namespace {

// Schedules a few follow-ups per event, some at the same time (so ties are broken by key),
// until it has handled `limit` events; logs (time, key, kind) of every event it handles.
struct Chain : NodeComponent {
  Chain(Sim& sim, std::uint32_t node, std::uint64_t limit) : NodeComponent(sim, "chain", node << 8), limit_(limit) {}
  void handle(const Event& e) override {
    log.emplace_back(e.time, e.key, e.kind);
    if (++handled_ >= limit_) return;
    schedule(e.time + 1 + (e.key * 7919) % 13, 1);
    if (e.kind % 3 == 0) schedule(e.time, 2);  // same time, later key
    if (e.kind == 1) schedule(e.time + 5, 3);
  }
  bool done() const override { return true; }
  std::vector<std::tuple<TimePs, std::uint64_t, std::uint32_t>> log;

 private:
  std::uint64_t limit_;
  std::uint64_t handled_ = 0;
};

std::vector<std::tuple<TimePs, std::uint64_t, std::uint32_t>> run_in_slices(std::uint64_t slice,
                                                                            std::uint64_t* calls) {
  proto::Configure cfg = two_node_link({0, 0});
  cfg.add_hosted_nodes(0);
  cfg.add_hosted_nodes(1);
  Sim sim;
  sim.configure(cfg);
  Chain a(sim, 0, 4000), b(sim, 1, 3000);
  sim.attach_node(0, &a);
  sim.attach_node(1, &b);
  a.schedule(10, 0);
  b.schedule(10, 0);
  b.schedule(3, 1);
  *calls = 0;
  std::uint64_t total = 0;
  while (sim.next_event_time() != kNever) {
    const std::uint64_t n = sim.run_until(kNever, slice);
    EXPECT_LE(n, slice);
    total += n;
    ++*calls;
  }
  EXPECT_EQ(total, sim.events_processed());
  auto log = a.log;
  log.insert(log.end(), b.log.begin(), b.log.end());
  return log;
}

TEST(SimSlices, StoppingAfterAnyNumberOfEventsContinuesExactly) {
  std::uint64_t calls = 0;
  const auto whole = run_in_slices(UINT64_MAX, &calls);
  EXPECT_EQ(calls, 1u);
  const std::uint64_t events = whole.size();
  ASSERT_GT(events, 7000u);  // the chains' last events still leave follow-ups behind
  for (const std::uint64_t slice : std::vector<std::uint64_t>{1, 2, 7, 100, events - 1}) {
    EXPECT_EQ(run_in_slices(slice, &calls), whole) << "slices of " << slice;
    EXPECT_EQ(calls, (events + slice - 1) / slice) << "slices of " << slice;
  }
}

TEST(SimSlices, TheBudgetStopsShortOfUntilAndUntilStillBounds) {
  proto::Configure cfg = two_node_link({0, 0});
  cfg.add_hosted_nodes(0);
  cfg.add_hosted_nodes(1);
  Sim sim;
  sim.configure(cfg);
  Chain a(sim, 0, 0);  // no follow-ups
  sim.attach_node(0, &a);
  for (TimePs t = 0; t < 10; ++t) a.schedule(100 * t, 4);
  EXPECT_EQ(sim.run_until(kNever, 3), 3u);
  EXPECT_EQ(sim.now(), 200u);
  EXPECT_EQ(sim.run_until(450, 5), 2u);  // until comes first
  EXPECT_EQ(sim.next_event_time(), 500u);
  EXPECT_EQ(sim.run_until(kNever), 5u);
}

}  // namespace
}  // namespace cais
