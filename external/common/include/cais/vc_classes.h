// The virtual-channel ranges of the protocol's traffic classes, one rule for every sender (the
// GPU's NVLink egress, the collective model) and the switch's VC allocator.
//
// Requests and responses use disjoint halves (deadlock freedom). Traffic control (CAIS) splits
// the request half: load requests are headers only (their data comes back on the response
// VCs), so a quarter of it carries them, and reductions and stores keep the rest, so that at
// 256-flit VCs and 250 ns links each bulk class still has about the VCs it needs to fill a link
// alone (docs/DESIGN_NOTES.md, "VC buffers").
#pragma once
#include <algorithm>
#include <cstdint>
#include <string>

#include "cais/errors.h"

namespace cais {

struct VcRange {
  std::uint32_t first = 0, count = 0;
};

struct VcSplit {
  VcRange request;    // without traffic control: every request and posted write
  VcRange load;       // with traffic control: load requests
  VcRange reduction;  // with traffic control: reductions and stores
  VcRange response;
};

// Minimum VCs per port the classes need.
inline std::uint32_t min_vcs(bool traffic_control) { return traffic_control ? 4 : 2; }

// The split of `vcs` VCs per port; throws ConfigError (net.vcs_per_port) if vcs is too small.
inline VcSplit vc_split(std::uint32_t vcs, bool traffic_control) {
  if (vcs < min_vcs(traffic_control))
    throw ConfigError("net.vcs_per_port", "needs >= " + std::to_string(min_vcs(traffic_control)) +
                                              " VCs (request/response classes" +
                                              (traffic_control ? ", loads and reductions apart)" : ")"));
  const std::uint32_t req = vcs / 2, load = std::max<std::uint32_t>(1, req / 4);
  VcSplit s;
  s.request = {0, req};
  s.response = {req, vcs - req};
  s.load = traffic_control ? VcRange{0, load} : s.request;
  s.reduction = traffic_control ? VcRange{load, req - load} : s.request;
  return s;
}

}  // namespace cais
