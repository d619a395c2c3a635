// GPU model "synthetic": a BookSim-style traffic terminal for network-only studies.
//
// Each terminal creates packets by a Bernoulli process (probability `rate` per cycle; the gap to
// the next packet is sampled from the geometric distribution, so nothing ticks per cycle), puts
// them in an unbounded source queue and sends them as credits allow; it sinks arriving packets
// at line rate. One cycle is one flit time on the terminal's link. Measurement follows BookSim:
// packets created after the warm-up, during the measurement window, are "measured"; their
// latency runs from creation (source queueing included) to the arrival of the tail. Accepted
// throughput counts flits arriving during the window.
#pragma once
#include <cstdint>
#include <deque>
#include <random>
#include <string>
#include <vector>

#include "cais/component.h"
#include "cais/link.h"
#include "cais/routing.h"
#include "cais/stats.h"

namespace cais::net {

enum class SyntheticPattern { kUniform, kRandPerm, kHotspot };

struct SyntheticCounters {
  std::uint64_t generated_packets = 0;
  std::uint64_t sent_flits = 0;
  std::uint64_t received_flits = 0;
  std::uint64_t received_packets = 0;
  std::uint64_t accepted_flits = 0;     // received during the measurement window
  std::uint64_t measured_sent = 0;      // measured packets created here
  std::uint64_t measured_received = 0;  // measured packets delivered here
  double latency_sum_cycles = 0;        // over measured packets delivered here
  // BookSim's stability check (latency_thres): packets in flight and those delivered since the
  // current phase (warm-up, measurement) began.
  double generated_inject_ps_sum = 0;   // creation times of the packets created here
  double received_inject_ps_sum = 0;    // creation times of the packets delivered here
  std::uint64_t phase_received = 0;     // packets delivered here in the current phase
  double phase_latency_sum_cycles = 0;  // their latencies
};

class SyntheticTerminal : public NodeComponent {
 public:
  SyntheticTerminal(Sim& sim, std::uint32_t node);
  void handle(const Event& e) override;
  bool done() const override;
  std::string blocked_reason() const override;
  void check_drained() const override;
  // Takes its credits without credit packets (cais/deferred_credits.h).
  OutputChannel* direct_credit_channel(std::uint32_t port) override;

  // Stop creating packets (packets already created are still sent).
  void stop_injection() { stop_ = true; }
  void begin_phase() {
    c_.phase_received = 0;
    c_.phase_latency_sum_cycles = 0;
  }
  const SyntheticCounters& counters() const { return c_; }
  const Histogram& latency_cycles() const { return latency_; }
  TimePs cycle_ps() const { return cycle_ps_; }
  TimePs measure_begin_ps() const { return measure_begin_ps_; }
  TimePs measure_end_ps() const { return measure_end_ps_; }

 private:
  enum EventKind : std::uint32_t { kGenerate = 1, kPortFree = 2, kCreditWake = 3 };
  void generate();
  void schedule_next_generation();
  std::uint32_t pick_destination();
  void pump(std::uint32_t port);
  void try_send(std::uint32_t port);
  void on_arrival(PacketHandle h);

  std::uint32_t node_;
  SyntheticPattern pattern_ = SyntheticPattern::kUniform;
  std::vector<std::uint32_t> hotspots_, perm_;
  std::uint32_t flit_bytes_ = 16, header_flits_ = 1, packet_flits_ = 1, vcs_ = 1;
  double rate_ = 0;  // packets per cycle
  TimePs cycle_ps_ = 1000, measure_begin_ps_ = 0, measure_end_ps_ = 0, stop_ps_ = 0;
  bool stop_ = false, generating_ = false;
  bool announce_head_ = false;  // net.sw_alloc_granularity=flit: packets announced at their head
  std::mt19937_64 rng_;
  std::geometric_distribution<std::uint64_t> gap_;
  PlaneHash planes_;
  std::vector<OutputChannel> out_;
  std::vector<InputBuffer> in_;
  std::vector<std::deque<PacketHandle>> queues_;
  std::vector<std::uint32_t> next_vc_;
  std::vector<std::uint8_t> free_pending_;  // a kPortFree event is scheduled for the port
  SyntheticCounters c_;
  Histogram latency_;
};

}  // namespace cais::net
