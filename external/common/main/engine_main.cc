// cais-engine: one co-simulation process. Hosts the GPU and/or switch nodes its Configure
// message assigns, and follows the harness's lock-step protocol over ZMQ.
#include <cstdlib>
#include <iostream>
#include <string>

#include "cais/engine_host.h"

namespace {
void usage() {
  std::cerr << "usage: cais-engine --connect ENDPOINT --name NAME [--fault crash|hang|garbage:WINDOW]\n"
            << "  ENDPOINT is a ZMQ address such as ipc:///tmp/x or tcp://host:port\n";
}
}  // namespace

int main(int argc, char** argv) {
  std::string endpoint, name;
  cais::FaultInjection fault;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        usage();
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--connect") endpoint = value();
    else if (a == "--name") name = value();
    else if (a == "--fault") {
      const std::string f = value();
      const auto colon = f.find(':');
      fault.kind = f.substr(0, colon);
      fault.at_window = colon == std::string::npos ? 1 : std::stoull(f.substr(colon + 1));
      if (fault.kind != "crash" && fault.kind != "hang" && fault.kind != "garbage") {
        std::cerr << "--fault: unknown kind '" << fault.kind << "' (allowed: crash, hang, garbage)\n";
        return 2;
      }
    } else if (a == "--help" || a == "-h") {
      usage();
      return 0;
    } else {
      std::cerr << "cais-engine: unknown argument '" << a << "'\n";
      usage();
      return 2;
    }
  }
  if (endpoint.empty() || name.empty()) {
    usage();
    return 2;
  }
  return cais::run_engine_host(endpoint, name, fault);
}
