// A topology for the engine-common tests: GPU nodes "a" (0) and "b" (1) joined by one link each
// way (a link needs its way back: Sim::configure), 16 GB/s, 1 ns; node i hosted by engine_of[i].
#pragma once
#include <array>
#include <cstdint>

#include "cosim.pb.h"

namespace cais {

inline proto::Configure two_node_link(std::array<std::uint32_t, 2> engine_of) {
  proto::Configure cfg;
  for (std::uint32_t i = 0; i < 2; ++i) {
    auto* n = cfg.mutable_topology()->add_nodes();
    n->set_id(i);
    n->set_kind(proto::NODE_GPU);
    n->set_name(i ? "b" : "a");
    n->set_num_ports(1);
    cfg.add_node_engine(engine_of[i]);
    auto* l = cfg.mutable_topology()->add_links();
    l->set_src_node(i);
    l->set_dst_node(1 - i);
    l->set_bw_gbps(16);
    l->set_latency_ps(1000);
  }
  return cfg;
}

}  // namespace cais
