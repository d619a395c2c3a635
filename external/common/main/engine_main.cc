// cais-engine: one co-simulation process. Hosts the GPU and/or switch nodes its Configure
// message assigns, and follows the harness's lock-step protocol over ZeroMQ or shared memory.
#include <cstdlib>
#include <exception>
#include <iostream>
#include <memory>
#include <string>

#include "cais/engine_host.h"

namespace {
void usage() {
  std::cerr << "usage: cais-engine (--connect ENDPOINT | --shm-fd FD --slot I [--spin-us US]) --name NAME\n"
            << "                   [--fault crash|hang|garbage:WINDOW]\n"
            << "  ENDPOINT is a ZeroMQ address such as ipc:///tmp/x or tcp://host:port;\n"
            << "  FD is an inherited shared-memory segment of the harness, I this engine's slot in it,\n"
            << "  US how long to spin for a message before sleeping\n";
}
}  // namespace

int main(int argc, char** argv) {
  std::string endpoint, name;
  int shm_fd = -1;
  long long slot = -1, spin_us = 0;
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
    else if (a == "--shm-fd") shm_fd = std::stoi(value());
    else if (a == "--slot") slot = std::stoll(value());
    else if (a == "--spin-us") spin_us = std::stoll(value());
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
  if (name.empty() || endpoint.empty() == (shm_fd < 0) || (shm_fd >= 0 && slot < 0) || spin_us < 0) {
    usage();
    return 2;
  }
  std::unique_ptr<cais::EngineLink> link;
  try {
    link = shm_fd >= 0 ? cais::attach_shm(shm_fd, static_cast<std::uint32_t>(slot), spin_us * 1000)
                       : cais::connect_zmq(endpoint, name);
  } catch (const std::exception& e) {
    std::cerr << name << ": cannot reach the harness: " << e.what() << std::endl;
    return 2;
  }
  return cais::run_engine_host(*link, name, fault);
}
