// Helpers for router tests: small topologies and complete parameter sets.
#pragma once
#include <string>
#include <vector>

#include "cosim.pb.h"

namespace cais::net::testing {

struct TopoBuilder {
  proto::Configure cfg;
  std::vector<std::uint32_t> ports;
  double bw_gbps = 16.0;
  std::uint64_t latency_ps = 1000;

  std::uint32_t node(proto::NodeKind kind, const std::string& name) {
    auto* n = cfg.mutable_topology()->add_nodes();
    const auto id = static_cast<std::uint32_t>(ports.size());
    n->set_id(id);
    n->set_kind(kind);
    n->set_name(name);
    ports.push_back(0);
    return id;
  }
  void channel(std::uint32_t a, std::uint32_t b, std::uint32_t lanes = 1) {
    const std::uint32_t pa = ports[a]++, pb = ports[b]++;
    for (int dir = 0; dir < 2; ++dir) {
      auto* l = cfg.mutable_topology()->add_links();
      l->set_src_node(dir ? b : a);
      l->set_src_port(dir ? pb : pa);
      l->set_dst_node(dir ? a : b);
      l->set_dst_port(dir ? pa : pb);
      l->set_bw_gbps(bw_gbps * lanes);
      l->set_latency_ps(latency_ps);
      l->set_lanes(lanes);
    }
  }
  void set(const std::string& k, long v) { (*cfg.mutable_params())[k].set_i(v); }
  void set_d(const std::string& k, double v) { (*cfg.mutable_params())[k].set_d(v); }
  void set_s(const std::string& k, const std::string& v) { (*cfg.mutable_params())[k].set_s(v); }
  void set_b(const std::string& k, bool v) { (*cfg.mutable_params())[k].set_b(v); }

  // Every net.* key the router reads (values of the synthetic comparison: 1 ns cycles).
  void net_params(long vcs = 8, long depth = 256) {
    set("net.vcs_per_port", vcs);
    set("net.vc_depth_flits", depth);
    set("net.flit_bytes", 16);
    set("net.header_flits", 1);
    set_d("net.routing_delay_ns", 1);
    set_d("net.vc_alloc_delay_ns", 1);
    set_d("net.sw_alloc_delay_ns", 1);
    set_d("net.xbar_delay_ns", 1);
    set_d("net.credit_delay_ns", 1);
    set_d("net.stats_bin_ns", 1000);
    set("net.sw_alloc_patience", 2);
    set_b("net.traffic_control", false);
    set_b("net.functional", false);
    set_s("net.features", "");
    set_s("host.switch_model", "nvswitch");
  }
  void synthetic(const std::string& traffic, double packets_per_cycle, long packet_flits, long warmup, long measure) {
    set_s("host.gpu_model", "synthetic");
    set_s("synthetic.traffic", traffic);
    (*cfg.mutable_params())["synthetic.hotspot_nodes"].mutable_list()->add_items()->set_i(0);
    set("synthetic.packet_flits", packet_flits);
    set_d("synthetic.injection_rate_packets_per_cycle", packets_per_cycle);
    set("synthetic.warmup_cycles", warmup);
    set("synthetic.measure_cycles", measure);
    set("synthetic.max_drain_cycles", 1000000);
  }
  void traffic(long requests, long bytes = 128, double read_fraction = 0.5, long outstanding = 16) {
    set_s("host.gpu_model", "traffic");
    set("traffic.requests_per_gpu", requests);
    set("traffic.request_bytes", bytes);
    set_d("traffic.read_fraction", read_fraction);
    set("traffic.max_outstanding", outstanding);
    set_d("traffic.issue_gap_ns", 0);
  }
  proto::Configure done(std::uint64_t seed = 1) {
    for (auto& n : *cfg.mutable_topology()->mutable_nodes()) n.set_num_ports(ports[n.id()]);
    cfg.clear_hosted_nodes();
    cfg.clear_node_engine();
    for (std::uint32_t i = 0; i < ports.size(); ++i) {
      cfg.add_hosted_nodes(i);
      cfg.add_node_engine(0);
    }
    cfg.set_seed(seed);
    cfg.set_window_ps(latency_ps);
    return cfg;
  }
};

// k terminals on one k-port switch.
inline TopoBuilder xbar(std::uint32_t k) {
  TopoBuilder b;
  std::vector<std::uint32_t> g;
  for (std::uint32_t i = 0; i < k; ++i) g.push_back(b.node(proto::NODE_GPU, "gpu" + std::to_string(i)));
  const auto sw = b.node(proto::NODE_SWITCH, "sw0");
  for (auto x : g) b.channel(x, sw);
  return b;
}

// Two-level fat tree: `leaves` leaf switches of `per_leaf` GPUs, each leaf linked to every spine.
inline TopoBuilder fat_tree(std::uint32_t leaves, std::uint32_t per_leaf, std::uint32_t spines) {
  TopoBuilder b;
  std::vector<std::uint32_t> g, l, s;
  for (std::uint32_t i = 0; i < leaves * per_leaf; ++i) g.push_back(b.node(proto::NODE_GPU, "gpu" + std::to_string(i)));
  for (std::uint32_t i = 0; i < leaves; ++i) l.push_back(b.node(proto::NODE_SWITCH, "leaf" + std::to_string(i)));
  for (std::uint32_t i = 0; i < spines; ++i) s.push_back(b.node(proto::NODE_SWITCH, "spine" + std::to_string(i)));
  for (std::uint32_t i = 0; i < g.size(); ++i) b.channel(g[i], l[i / per_leaf]);
  for (auto x : l)
    for (auto y : s) b.channel(x, y, 2);
  return b;
}

// DGX-style: every GPU has one port to each of `planes` switches (lanes per plane).
inline TopoBuilder dgx(std::uint32_t gpus, const std::vector<std::uint32_t>& lanes) {
  TopoBuilder b;
  std::vector<std::uint32_t> g, s;
  for (std::uint32_t i = 0; i < gpus; ++i) g.push_back(b.node(proto::NODE_GPU, "gpu" + std::to_string(i)));
  for (std::uint32_t i = 0; i < lanes.size(); ++i) s.push_back(b.node(proto::NODE_SWITCH, "sw" + std::to_string(i)));
  for (auto x : g)
    for (std::uint32_t p = 0; p < s.size(); ++p) b.channel(x, s[p], lanes[p]);
  return b;
}

}  // namespace cais::net::testing
