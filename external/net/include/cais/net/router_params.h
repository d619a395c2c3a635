// Parameters of the NVSwitch router model, read once from the engine's params (net.*).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "cais/link.h"
#include "cais/time.h"

namespace cais::net {

struct RouterParams {
  VcLayout vcs;                  // net.vcs_per_port and net.vc_depth_flits against the topology
  std::uint32_t flit_bytes = 16;
  std::uint32_t header_flits = 1;
  TimePs routing_ps = 0;
  TimePs vc_alloc_ps = 0;
  TimePs sw_alloc_ps = 0;
  TimePs xbar_ps = 0;
  TimePs credit_ps = 0;
  TimePs stats_bin_ps = 1000000;
  std::uint32_t sw_alloc_patience = 2;  // lost arbitrations before an input moves on (0: never)
  std::uint32_t internal_speedup = 1;   // flit level: crossbar cycles per link flit time (nvswitch_flit.cc)
  // Flits an output may hold queued for its link beyond the packet on the wire (0: none, an
  // output takes a packet only when its link is idle). With a queue, a granted input is busy
  // only while the packet crosses the crossbar at the input's rate, not until the output has
  // sent it: the packet-level stand-in for a crossbar that interleaves flits from several
  // inputs onto one output (a 1-flit response does not wait a whole data packet's time at
  // its input while the input's data could go elsewhere).
  std::uint32_t output_queue_flits = 0;
  // net.sw_alloc_granularity=flit: the switch is allocated per flit (BookSim's router), so
  // flits of packets from different inputs interleave on an output (the harness default); `packet`:
  // a granted packet holds its input and output until its tail has left.
  bool flit_level = false;
  bool traffic_control = false;
  bool functional = false;
  std::vector<std::string> features;

  // Reads every net.* key the router uses (VC layout against sim's topology); throws
  // ConfigError naming a bad key.
  static RouterParams from(const Sim& sim);
  // Head-to-allocation pipeline (routing + VC allocation + switch allocation).
  TimePs pipeline_ps() const { return routing_ps + vc_alloc_ps + sw_alloc_ps; }
};

// Keys under net.* that only the harness uses (the engine marks them read).
const std::vector<std::string>& harness_only_net_keys();

}  // namespace cais::net
