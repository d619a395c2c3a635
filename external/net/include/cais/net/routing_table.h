// Deterministic shortest-path routing for one switch.
//
// Built once from the topology: for every destination node the set of output ports that lie on
// a shortest path (paths pass through switches only; GPUs are endpoints). Where a set has more
// than one port (leaf -> spines in a two-level fabric), the port is chosen by PlaneHash on the
// packet's address (or on its group key for sync packets), weighted by the ports' lanes, so
// one address always takes one path and every request for it meets in one switch.
#pragma once
#include <cstdint>
#include <vector>

#include "cais/packet.h"
#include "cais/routing.h"

namespace cais {
class Sim;
}

namespace cais::net {

inline constexpr std::uint32_t kNoRoute = 0xffffffffu;

class RoutingTable {
 public:
  void build(const Sim& sim, std::uint32_t self);
  // Output port for `p` (kNoRoute if its destination is unreachable or is this switch).
  std::uint32_t route(const Packet& p) const {
    const std::uint32_t set = p.dst < table_.size() ? table_[p.dst] : kNoRoute;
    if (set == kNoRoute) return kNoRoute;
    const Choice& c = choices_[set];
    if (c.ports.size() == 1) return c.ports[0];
    const bool by_key = p.type == proto::PKT_SYNC_REQ || p.type == proto::PKT_SYNC_RELEASE;
    return c.ports[by_key ? c.hash.plane_for_key(p.group) : c.hash.plane(p.addr)];
  }
  // Candidate ports toward `dst` (empty if none).
  const std::vector<std::uint32_t>& candidates(std::uint32_t dst) const;
  // Hops from this switch to `dst` (0 for itself, kNoRoute if unreachable).
  std::uint32_t distance(std::uint32_t dst) const { return dst < dist_.size() ? dist_[dst] : kNoRoute; }

 private:
  struct Choice {
    std::vector<std::uint32_t> ports;
    PlaneHash hash;  // index into ports
  };
  std::vector<std::uint32_t> table_;  // dst -> index into choices_
  std::vector<std::uint32_t> dist_;
  std::vector<Choice> choices_;
};

}  // namespace cais::net
