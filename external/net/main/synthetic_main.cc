// cais-net-synthetic: the network engine alone, driven by a BookSim-style config file.
//
//   cais-net-synthetic CONFIG [key=value ...] [--csv PATH]
//
// Builds one k-port nvswitch with k "synthetic" terminals (fly, n = 1), runs the warm-up and
// the measurement window, drains the measured packets (BookSim's latency mode), then stops the
// sources, drains the network and checks every invariant (credits home, buffers empty, flits
// sent == flits received). Prints one CSV row (with header) to stdout or PATH.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "cais/engine_host.h"
#include "cais/errors.h"
#include "cais/net/booksim_config.h"
#include "cais/net/synthetic_terminal.h"

namespace {

void usage() {
  std::cerr << "usage: cais-net-synthetic CONFIG [key=value ...] [--csv PATH] | --keys\n"
               "  CONFIG is a BookSim-style file (key = value; lines, // comments); key=value\n"
               "  arguments override it, as on BookSim's command line.\n";
}

int run(int argc, char** argv) {
  std::string path, csv;
  std::vector<std::string> overrides;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--csv") {
      if (i + 1 >= argc) {
        usage();
        return 2;
      }
      csv = argv[++i];
    } else if (a == "--keys") {  // the supported keys and their defaults (kept in step with Python)
      for (const auto& kv : cais::net::booksim_supported_keys()) std::cout << kv.first << " = " << kv.second << ";\n";
      return 0;
    } else if (a == "-h" || a == "--help") {
      usage();
      return 0;
    } else if (a.find('=') != std::string::npos) {
      overrides.push_back(a);
    } else if (path.empty()) {
      path = a;
    } else {
      std::cerr << "cais-net-synthetic: unexpected argument '" << a << "'\n";
      usage();
      return 2;
    }
  }
  if (path.empty()) {
    usage();
    return 2;
  }
  const auto t0 = std::chrono::steady_clock::now();
  auto bc = cais::net::BooksimConfig::from_file(path);
  for (const auto& o : overrides) bc.set_override(o);
  const cais::proto::Configure cfg = bc.to_configure();

  cais::HostedModel model;
  model.configure(cfg);
  cais::Sim& sim = model.sim();
  std::vector<cais::net::SyntheticTerminal*> terms;
  for (const auto& n : model.nodes())
    if (auto* t = dynamic_cast<cais::net::SyntheticTerminal*>(n.get())) terms.push_back(t);
  if (terms.empty()) throw cais::InvariantError("no synthetic terminals were built");
  const cais::TimePs cycle = terms[0]->cycle_ps();
  const cais::TimePs begin = terms[0]->measure_begin_ps(), end = terms[0]->measure_end_ps();
  const cais::TimePs step = static_cast<cais::TimePs>(bc.get_int("sample_period")) * cycle;
  const cais::TimePs drain_limit = end + (end - begin + begin) * 4;

  auto measured_left = [&] {
    std::uint64_t sent = 0, got = 0;
    for (auto* t : terms) {
      sent += t->counters().measured_sent;
      got += t->counters().measured_received;
    }
    return sent - got;
  };
  // BookSim's stability check after every sample period: the average latency of the packets
  // delivered in this phase and of those still in flight (aged to now) above latency_thres
  // aborts the run as unstable (a negative threshold disables it, as in BookSim).
  const double latency_thres = bc.get_double("latency_thres");
  auto average_latency = [&](cais::TimePs now) {
    double gen = 0, got = 0, gen_ps = 0, got_ps = 0, phase_n = 0, phase_sum = 0;
    for (auto* t2 : terms) {
      const auto& c = t2->counters();
      gen += static_cast<double>(c.generated_packets);
      got += static_cast<double>(c.received_packets);
      gen_ps += c.generated_inject_ps_sum;
      got_ps += c.received_inject_ps_sum;
      phase_n += static_cast<double>(c.phase_received);
      phase_sum += c.phase_latency_sum_cycles;
    }
    const double in_flight = gen - got;
    const double age_sum = (in_flight * static_cast<double>(now) - (gen_ps - got_ps)) / static_cast<double>(cycle);
    const double n = phase_n + in_flight;
    return n > 0 ? (phase_sum + age_sum) / n : 0.0;
  };
  cais::TimePs t = 0;
  bool stable = true;
  bool measuring = false;
  for (;;) {
    t += step;
    sim.run_until(t);
    if (!measuring && t >= begin) {
      measuring = true;
      for (auto* t2 : terms) t2->begin_phase();
    }
    if (t >= end && measured_left() == 0) break;
    const bool too_slow = t <= end && latency_thres >= 0 && average_latency(t) > latency_thres;
    if (too_slow || t >= drain_limit) {
      if (too_slow)
        std::cerr << "Average latency for class 0 exceeded " << latency_thres << " cycles. Aborting simulation.\n";
      std::cerr << "Simulation unstable, ending ...\n";
      stable = false;
      break;
    }
  }
  const cais::TimePs measured_done = t;
  // Stop the sources; a stable run then drains completely and must balance exactly.
  for (auto* t2 : terms) t2->stop_injection();
  if (stable) {
    sim.run_until(cais::kNever);
    if (!model.done()) throw cais::InvariantError("network did not drain: " + model.blocked_reason());
    model.check_drained();
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  cais::net::SyntheticCounters sum;
  for (auto* t2 : terms) {
    const auto& c = t2->counters();
    sum.generated_packets += c.generated_packets;
    sum.sent_flits += c.sent_flits;
    sum.received_flits += c.received_flits;
    sum.received_packets += c.received_packets;
    sum.accepted_flits += c.accepted_flits;
    sum.measured_sent += c.measured_sent;
    sum.measured_received += c.measured_received;
    sum.latency_sum_cycles += c.latency_sum_cycles;
  }
  if (stable && sum.sent_flits != sum.received_flits)
    throw cais::InvariantError("flits sent (" + std::to_string(sum.sent_flits) + ") != flits received (" +
                               std::to_string(sum.received_flits) + ")");
  const double nodes = static_cast<double>(terms.size());
  const double window_cycles = static_cast<double>(end - begin) / static_cast<double>(cycle);
  const double latency = sum.measured_received ? sum.latency_sum_cycles / static_cast<double>(sum.measured_received) : 0.0;
  const double accepted = sum.accepted_flits / nodes / window_cycles;

  std::ostringstream os;
  os << std::setprecision(8);
  os << "offered,avg_packet_latency_cycles,accepted_flits_per_node_cycle,wall_s,stable,measured_packets,"
        "sim_cycles,delivered_flits,events,delivered_flits_per_wall_s,events_per_wall_s,saturated\n";
  os << bc.offered_flits() << ',' << latency << ',' << accepted << ',' << wall << ',' << (stable ? 1 : 0) << ','
     << sum.measured_received << ',' << (measured_done / cycle) << ',' << sum.received_flits << ','
     << sim.events_processed() << ',' << static_cast<double>(sum.received_flits) / wall << ','
     << static_cast<double>(sim.events_processed()) / wall << ','
     // Saturated: the network accepts clearly less than is offered (latency then grows without bound).
     << (accepted < 0.95 * bc.offered_flits() ? 1 : 0) << '\n';
  if (csv.empty()) {
    std::cout << os.str();
  } else {
    std::ofstream out(csv + ".tmp");
    out << os.str();
    out.close();
    if (!out || std::rename((csv + ".tmp").c_str(), csv.c_str()) != 0) {
      std::cerr << "cais-net-synthetic: cannot write " << csv << "\n";
      return 1;
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const cais::ConfigError& e) {
    std::cerr << "cais-net-synthetic: configuration error: " << e.what() << std::endl;
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "cais-net-synthetic: " << e.what() << std::endl;
    return 1;
  }
}
