// Direct credits change no result: a synthetic network run with credit packets everywhere and
// with direct credits (the default) gives the same deliveries at the same times. Small VC
// buffers and loads near saturation make sources and VC allocation wait for credits, which is
// where a missed or misplaced credit wake would show.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cais/engine_host.h"
#include "cais/net/booksim_config.h"
#include "cais/net/synthetic_terminal.h"

namespace cais::net {
namespace {

struct Outcome {
  std::uint64_t events = 0, received_flits = 0, received_packets = 0, measured = 0;
  double latency_sum = 0, inject_sum = 0;
  TimePs end = 0;
};

Outcome run(const std::string& overrides, bool credit_packets_only) {
  auto bc = BooksimConfig::from_string(
      "topology = fly; k = 8; n = 1; routing_function = dest_tag; num_vcs = 2; vc_buf_size = 4;"
      "packet_size = 4; vc_allocator = separable_input_first; sw_allocator = separable_input_first;"
      "routing_delay = 1; vc_alloc_delay = 1; sw_alloc_delay = 1; credit_delay = 1;"
      "traffic = uniform; injection_rate = 0.5; injection_rate_uses_flits = 1; sim_type = latency;"
      "sample_period = 1000; warmup_periods = 1; max_samples = 2; seed = 7;");
  for (std::size_t a = 0, b; a < overrides.size(); a = b + 1) {
    b = overrides.find(' ', a);
    if (b == std::string::npos) b = overrides.size();
    if (b > a) bc.set_override(overrides.substr(a, b - a));
  }
  HostedModel model;
  model.configure(bc.to_configure());
  model.sim().set_credit_packets_only(credit_packets_only);
  model.sim().run_until(5000 * 1000);  // 5000 cycles of 1 ns, then drain
  for (const auto& n : model.nodes())
    if (auto* t = dynamic_cast<SyntheticTerminal*>(n.get())) t->stop_injection();
  model.sim().run_until(kNever);
  model.check_drained();
  Outcome o;
  for (const auto& n : model.nodes()) {
    auto* t = dynamic_cast<SyntheticTerminal*>(n.get());
    if (t == nullptr) continue;
    const auto& c = t->counters();
    o.received_flits += c.received_flits;
    o.received_packets += c.received_packets;
    o.measured += c.measured_received;
    o.latency_sum += c.phase_latency_sum_cycles;
    o.inject_sum += c.received_inject_ps_sum;
  }
  o.events = model.sim().events_processed();
  return o;
}

TEST(DirectCredits, SameDeliveriesAsCreditPacketsWhileSendersWaitForCredits) {
  for (const std::string over : {"", "injection_rate=0.9", "packet_size=1 injection_rate=0.95",
                                 "traffic=hotspot({{0,1}}) injection_rate=0.2", "hold_switch_for_packet=1"}) {
    SCOPED_TRACE(over);
    const Outcome packets = run(over, true), direct = run(over, false);
    EXPECT_GT(packets.received_packets, 1000u);
    EXPECT_EQ(direct.received_flits, packets.received_flits);
    EXPECT_EQ(direct.received_packets, packets.received_packets);
    EXPECT_EQ(direct.latency_sum, packets.latency_sum);  // every packet's latency, summed in order
    EXPECT_EQ(direct.inject_sum, packets.inject_sum);
    EXPECT_LT(direct.events, packets.events);  // the credits nobody waited for cost no event
  }
}

}  // namespace
}  // namespace cais::net
