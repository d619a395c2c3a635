// cais-gpu-standalone: runs a serialized Configure (GPU nodes only, typically one GPU without
// links) to completion in one process, without ZMQ, and writes the statistics.
//
//   cais-gpu-standalone CONFIGURE.pb STATS.pb
//
// Exit codes: 0 done, 2 configuration error, 3 deadlock (idle but not done), 1 other errors.
#include <chrono>
#include <fstream>
#include <iostream>
#include <sstream>

#include "cais/engine_host.h"
#include "cais/errors.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: cais-gpu-standalone CONFIGURE.pb STATS.pb\n";
    return 2;
  }
  try {
    std::ifstream in(argv[1], std::ios::binary);
    if (!in) throw cais::ConfigError("", std::string("cannot read ") + argv[1]);
    std::stringstream buf;
    buf << in.rdbuf();
    cais::proto::Configure cfg;
    if (!cfg.ParseFromString(buf.str())) throw cais::ConfigError("", std::string(argv[1]) + " is not a serialized Configure");
    cais::HostedModel model;
    const auto t0 = std::chrono::steady_clock::now();
    model.configure(cfg);
    cais::Sim& sim = model.sim();
    sim.run_until(cais::kNever);
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!model.done()) {
      std::cerr << "cais-gpu-standalone: deadlock at " << sim.now() << " ps: " << model.blocked_reason() << "\n";
      return 3;
    }
    model.check_drained();
    cais::proto::Stats stats;
    model.export_stats(&stats);
    auto add = [&](const std::string& n, double v, const std::string& u) {
      auto* s = stats.add_stats();
      s->set_name(n);
      s->set_value(v);
      s->set_unit(u);
    };
    add("engine.events", static_cast<double>(sim.events_processed()), "events");
    add("engine.end_time", static_cast<double>(sim.now()), "ps");
    add("engine.wall_time", wall, "s");
    std::ofstream out(argv[2], std::ios::binary);
    if (!stats.SerializeToOstream(&out)) throw std::runtime_error(std::string("cannot write ") + argv[2]);
    return 0;
  } catch (const cais::ConfigError& e) {
    std::cerr << "cais-gpu-standalone: configuration error: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "cais-gpu-standalone: " << e.what() << "\n";
    return 1;
  }
}
