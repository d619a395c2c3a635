#include "cais/net/routing_table.h"

#include <deque>
#include <map>

#include "cais/sim.h"

namespace cais::net {

void RoutingTable::build(const Sim& sim, std::uint32_t self) {
  const std::uint32_t n = static_cast<std::uint32_t>(sim.num_nodes());
  // Incoming adjacency: in_adj[y] = nodes x with a link x -> y.
  std::vector<std::vector<std::uint32_t>> in_adj(n);
  for (std::uint32_t x = 0; x < n; ++x)
    for (const auto& l : sim.node(x).out)
      if (l.connected) in_adj[l.peer_node].push_back(x);
  const auto& me = sim.node(self);
  table_.assign(n, kNoRoute);
  dist_.assign(n, kNoRoute);
  choices_.clear();
  std::map<std::vector<std::uint32_t>, std::uint32_t> seen;
  std::vector<std::uint32_t> dist(n);
  std::deque<std::uint32_t> q;
  for (std::uint32_t d = 0; d < n; ++d) {
    // Reverse BFS from d; only d itself and switches may forward (GPUs are endpoints).
    std::fill(dist.begin(), dist.end(), kNoRoute);
    dist[d] = 0;
    q.assign(1, d);
    while (!q.empty()) {
      const std::uint32_t y = q.front();
      q.pop_front();
      if (y != d && sim.node(y).kind != proto::NODE_SWITCH) continue;
      for (std::uint32_t x : in_adj[y])
        if (dist[x] == kNoRoute) {
          dist[x] = dist[y] + 1;
          q.push_back(x);
        }
    }
    dist_[d] = dist[self];
    if (d == self || dist[self] == kNoRoute) continue;
    std::vector<std::uint32_t> ports, weights;
    for (std::uint32_t p = 0; p < me.out.size(); ++p) {
      const auto& l = me.out[p];
      if (!l.connected) continue;
      const std::uint32_t y = l.peer_node;
      if (dist[y] + 1 != dist[self]) continue;
      if (y != d && sim.node(y).kind != proto::NODE_SWITCH) continue;
      ports.push_back(p);
    }
    if (ports.empty()) continue;
    auto it = seen.find(ports);
    if (it == seen.end()) {
      Choice c;
      c.ports = ports;
      for (std::uint32_t p : ports) weights.push_back(std::max<std::uint32_t>(1, me.out[p].lanes));
      c.hash = PlaneHash(weights, 128);
      choices_.push_back(std::move(c));
      it = seen.emplace(ports, static_cast<std::uint32_t>(choices_.size() - 1)).first;
    }
    table_[d] = it->second;
  }
}

const std::vector<std::uint32_t>& RoutingTable::candidates(std::uint32_t dst) const {
  static const std::vector<std::uint32_t> none;
  if (dst >= table_.size() || table_[dst] == kNoRoute) return none;
  return choices_[table_[dst]].ports;
}

}  // namespace cais::net
