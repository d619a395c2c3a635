// Acceptance of the in-switch features through the real NVSwitch router ("nvswitch"): GPUs of
// a DGX-style system (4 switch planes, address-hashed plane choice) issue red.cais / ld.cais /
// multimem traffic with random values; what the GPUs receive must equal the exact sums and
// lines computed here, with the paper's table and with a table shrunk until evictions and
// timeouts happen, and every switch must end drained.
//
// The GPU side is a small test node registered here as GPU model "feature_test": it sends the
// packets of a workload prepared by the test (through credits and links like a real GPU) and
// accumulates whatever arrives.
#include <gtest/gtest.h>

#include <array>
#include <deque>
#include <map>
#include <memory>
#include <cstdio>
#include <random>

#include "cais/engine_host.h"
#include "cais/errors.h"
#include "cais/link.h"
#include "cais/net/feature_nvls.h"
#include "cais/net/nvswitch.h"
#include "cais/net/vc_allocator.h"
#include "cais/routing.h"
#include "cais/sim.h"

namespace cais::net {
namespace {

constexpr std::uint32_t kReqVc = 0, kRespVc = 2;  // vcs_per_port = 4: requests [0,2), responses [2,4)

struct Send {
  TimePs t = 0;
  proto::PacketType type = proto::PKT_CAIS_RED;
  std::uint32_t dst = 0;
  std::uint64_t addr = 0;
  std::uint32_t aux = 0, count = 0, payload = 0, group = 0;
  std::uint64_t tag = 0;
  std::vector<double> values;
};

struct Acc {
  std::vector<double> sum;
  std::uint32_t count = 0;
  std::uint32_t packets = 0;
};

// The workload of every GPU and what they received (one test at a time).
struct Workload {
  std::vector<std::vector<Send>> sends;                  // per GPU, in time order
  std::vector<std::map<std::uint64_t, Acc>> red_rx;      // CAIS_RED / MM_* data received per address
  std::vector<std::map<std::uint64_t, std::vector<double>>> ld_rx;  // CAIS_LD_RESP per tag
  std::vector<std::uint64_t> expected_rx;                // packets a GPU must still see (done())
  std::vector<std::map<std::uint64_t, std::vector<double>>> memory;  // lines a GPU owns (serves loads)
  std::vector<std::uint64_t> throttles, acks, releases;
  std::vector<TimePs> max_throttle_latency, max_ld_latency;  // from the packet's inject_ps to its arrival
  bool member_acks = false;  // answer NVLS multicast copies with MM_ACK
  std::vector<std::uint32_t> sync_switches;  // group g syncs at sync_switches[g % n] (else: its plane)
};
Workload* g_wl = nullptr;

class FeatureTestGpu : public NodeComponent {
 public:
  FeatureTestGpu(Sim& sim, std::uint32_t node) : NodeComponent(sim, sim.node(node).name, node << 8), node_(node) {
    const Params& p = sim.params();
    flit_bytes_ = static_cast<std::uint32_t>(p.get_uint("net.flit_bytes"));
    header_flits_ = static_cast<std::uint32_t>(p.get_uint("net.header_flits"));
    traffic_control_ = p.get_bool("net.traffic_control");
    const auto vcs = static_cast<std::uint32_t>(p.get_uint("net.vcs_per_port"));
    vcs_ = vcs;
    const auto depth = static_cast<std::uint32_t>(p.get_uint("net.vc_depth_flits"));
    const auto& info = sim.node(node);
    std::vector<std::uint32_t> weights;
    out_.resize(info.out.size());
    in_.resize(info.out.size());
    queues_.resize(info.out.size());
    for (std::uint32_t port = 0; port < info.out.size(); ++port) {
      out_[port].init(info.out[port], vcs, depth, flit_bytes_, 1000000);
      in_[port].init(node, port, info.out[port], vcs, depth, 0);
      weights.push_back(info.out[port].connected ? std::max<std::uint32_t>(1, info.out[port].lanes) : 0);
    }
    planes_ = PlaneHash(weights, 128);
    const auto& s = g_wl->sends[node];
    for (std::uint32_t i = 0; i < s.size(); ++i) schedule(s[i].t, kIssue, i);
  }

  void handle(const Event& e) override {
    switch (e.kind) {
      case kPacketArrival: return on_arrival(static_cast<PacketHandle>(e.arg));
      case kIssue: return issue(static_cast<std::uint32_t>(e.arg));
      case kPortFree: return pump(e.arg32);
      default: throw InvariantError("feature test GPU: unknown event");
    }
  }
  bool done() const override {
    for (const auto& q : queues_)
      if (!q[0].empty() || !q[1].empty()) return false;
    return issued_ == g_wl->sends[node_].size() && g_wl->expected_rx[node_] == 0;
  }
  std::string blocked_reason() const override {
    return done() ? "" : "expects " + std::to_string(g_wl->expected_rx[node_]) + " more packets";
  }

 private:
  enum Kind : std::uint32_t { kIssue = 1, kPortFree = 2 };

  void issue(std::uint32_t i) {
    const Send& s = g_wl->sends[node_][i];
    const PacketHandle h = sim_.new_packet(*this);
    Packet& p = sim_.packets()[h];
    p.type = s.type;
    p.src = node_;
    p.dst = s.dst;
    p.addr = s.addr;
    p.aux = s.aux;
    p.count = s.count;
    p.tag = s.tag;
    p.group = s.group;
    p.payload_bytes = s.payload;
    p.flits = flits_for(s.payload, flit_bytes_, header_flits_);
    p.inject_ps = sim_.now();
    p.values = s.values;
    ++issued_;
    enqueue(h, kReqVc);
  }
  void enqueue(PacketHandle h, std::uint32_t vc) {
    const Packet& p = sim_.packets()[h];
    const bool sync = p.type == proto::PKT_SYNC_REQ;
    const std::uint32_t port = sync ? planes_.plane_for_key(p.group) : planes_.plane(p.addr);
    if (sync) {  // the switch that keeps the group's table
      const auto& sw = g_wl->sync_switches;
      sim_.packets()[h].dst = sw.empty() ? sim_.node(node_).out[port].peer_node : sw[p.group % sw.size()];
    }
    queues_[port][vc == kReqVc ? 0 : 1].push_back(h);
    pump(port);
  }
  void pump(std::uint32_t port) {
    OutputChannel& ch = out_[port];
    if (!ch.idle_at(sim_.now())) return;
    for (std::uint32_t k : {1u, 0u}) {
      auto& q = queues_[port][k];
      if (q.empty()) continue;
      const std::uint32_t vc = k == 1 ? kRespVc : request_vc(sim_.packets()[q.front()].type);
      if (!ch.has_credits(vc, sim_.packets()[q.front()].flits)) continue;
      const PacketHandle h = q.front();
      q.pop_front();
      schedule(ch.transmit(sim_, *this, h, vc), kPortFree, 0, port);
      return;
    }
  }
  void on_arrival(PacketHandle h) {
    const std::uint32_t port = sim_.packets()[h].hop_port;
    if (sim_.packets()[h].type == proto::PKT_CREDIT) {
      const Packet& c = sim_.packets()[h];
      out_[port].return_credits(c.vc, c.count);
      sim_.packets().release(h);
      pump(port);
      return;
    }
    in_[port].accept(sim_, h);
    in_[port].pop(sim_, *this, sim_.packets()[h].vc);
    const Packet p = sim_.packets()[h];  // a copy: creating packets below may move the pool
    sim_.packets().release(h);
    if (p.dst != node_) throw InvariantError(name() + ": got a packet for node " + std::to_string(p.dst));
    switch (p.type) {
      case proto::PKT_CAIS_RED:
      case proto::PKT_MM_RED:
      case proto::PKT_MM_ST: {
        Acc& a = g_wl->red_rx[node_][p.addr];
        if (a.sum.empty()) a.sum.assign(p.values.size(), 0.0);
        if (a.sum.size() != p.values.size()) throw InvariantError(name() + ": value count differs");
        for (std::size_t i = 0; i < p.values.size(); ++i) a.sum[i] += p.values[i];
        const std::uint32_t c = p.type == proto::PKT_CAIS_RED ? std::max<std::uint32_t>(1, p.count) : 1;
        a.count += c;
        ++a.packets;
        g_wl->expected_rx[node_] -= c;
        if (p.type != proto::PKT_CAIS_RED && g_wl->member_acks) {
          const PacketHandle r = sim_.new_packet(*this);
          Packet& q = sim_.packets()[r];
          q.type = proto::PKT_MM_ACK;
          q.src = node_;
          q.dst = p.src;
          q.addr = p.addr;
          q.tag = p.tag;
          q.flits = header_flits_;
          enqueue(r, kRespVc);
        }
        return;
      }
      case proto::PKT_SYNC_RELEASE:
        ++g_wl->releases[node_];
        --g_wl->expected_rx[node_];
        return;
      case proto::PKT_CAIS_LD_REQ:
      case proto::PKT_READ_REQ: {  // serve a line this GPU owns
        const PacketHandle r = sim_.new_packet(*this);
        Packet& q = sim_.packets()[r];
        q.type = p.type == proto::PKT_CAIS_LD_REQ ? proto::PKT_CAIS_LD_RESP : proto::PKT_READ_RESP;
        q.src = node_;
        q.dst = p.src;
        q.addr = p.addr;
        q.tag = p.tag;
        q.payload_bytes = p.type == proto::PKT_CAIS_LD_REQ ? p.count : p.aux;
        q.flits = flits_for(q.payload_bytes, flit_bytes_, header_flits_);
        q.inject_ps = p.inject_ps;
        q.values = g_wl->memory[node_].at(p.addr);
        enqueue(r, kRespVc);
        return;
      }
      case proto::PKT_CAIS_LD_RESP:
      case proto::PKT_MM_LD_REDUCE_RESP:
        g_wl->max_ld_latency[node_] = std::max(g_wl->max_ld_latency[node_], sim_.now() - p.inject_ps);
        g_wl->ld_rx[node_][p.tag] = p.values;
        --g_wl->expected_rx[node_];
        return;
      case proto::PKT_MM_ACK:
        ++g_wl->acks[node_];
        --g_wl->expected_rx[node_];
        return;
      case proto::PKT_THROTTLE:
        ++g_wl->throttles[node_];
        g_wl->max_throttle_latency[node_] = std::max(g_wl->max_throttle_latency[node_], sim_.now() - p.inject_ps);
        return;
      default: throw InvariantError(name() + ": unexpected " + proto::PacketType_Name(p.type));
    }
  }

  // A request's first VC of its class (under traffic control: loads and reductions apart).
  std::uint32_t request_vc(proto::PacketType t) const {
    return vc_range(vc_class_of(t, traffic_control_), vcs_, traffic_control_).first;
  }

  std::uint32_t node_;
  bool traffic_control_ = false;
  std::uint32_t vcs_ = 4;
  std::uint32_t flit_bytes_ = 16, header_flits_ = 1;
  std::uint64_t issued_ = 0;
  PlaneHash planes_;
  std::vector<OutputChannel> out_;
  std::vector<InputBuffer> in_;
  std::vector<std::array<std::deque<PacketHandle>, 2>> queues_;
};

const bool registered = [] {
  NodeFactory f;
  f.engine = "gpu";
  f.build = [](Sim& sim, std::uint32_t node) { return std::make_unique<FeatureTestGpu>(sim, node); };
  NodeRegistry::instance().add(proto::NODE_GPU, "feature_test", std::move(f));
  return true;
}();

// The router with the routing facts the merge unit asks for (SwitchContext::port_toward,
// attached), as NvSwitch should answer them in multi-level fabrics: registered here as switch
// model "nvswitch_routed" until the router itself overrides them.
class RoutedNvSwitch : public NvSwitch {
 public:
  using NvSwitch::NvSwitch;
  std::uint32_t port_toward(std::uint32_t dst) const override {
    const auto& c = routing().candidates(dst);
    return c.empty() ? dst : c[0];
  }
  bool attached(std::uint32_t dst) const override { return routing().distance(dst) == 1; }
};

// The router answering as if every fabric were single-level (SwitchContext's defaults):
// switch model "nvswitch_flat".
class FlatNvSwitch : public NvSwitch {
 public:
  using NvSwitch::NvSwitch;
  std::uint32_t port_toward(std::uint32_t dst) const override { return dst; }
  bool attached(std::uint32_t) const override { return true; }
};

template <class Model>
void register_switch(const std::string& name) {
  NodeFactory f;
  f.engine = "net";
  f.param_prefixes = {"net."};
  f.setup = [](Sim& sim) { NodeRegistry::instance().find(proto::NODE_SWITCH, "nvswitch")->setup(sim); };
  f.build = [](Sim& sim, std::uint32_t node) -> std::unique_ptr<NodeComponent> {
    return std::make_unique<Model>(sim, node);
  };
  NodeRegistry::instance().add(proto::NODE_SWITCH, name, std::move(f));
}

const bool registered_switches = [] {
  register_switch<RoutedNvSwitch>("nvswitch_routed");
  register_switch<FlatNvSwitch>("nvswitch_flat");
  return true;
}();

// ------------------------------------------------------------------ configuration
proto::ParamValue pv(std::int64_t v) {
  proto::ParamValue p;
  p.set_i(v);
  return p;
}
proto::ParamValue pvd(double v) {
  proto::ParamValue p;
  p.set_d(v);
  return p;
}
proto::ParamValue pvs(const std::string& v) {
  proto::ParamValue p;
  p.set_s(v);
  return p;
}
proto::ParamValue pvb(bool v) {
  proto::ParamValue p;
  p.set_b(v);
  return p;
}

struct System {
  std::uint32_t gpus = 8, planes = 4;
  std::string features = "nvls,group_sync,cais_merge";
  std::int64_t table_entries = 320, table_bytes = 40960;
  bool unlimited = false;
  double timeout_ns = 5000;
  bool throttle = false;
  bool traffic_control = false;
  bool member_acks = false;
  std::uint32_t leaves = 0;  // > 0: two-level fabric of `leaves` leaf switches under one spine
  std::string switch_model = "nvswitch";
};

void add_link_pair(proto::Topology* topo, std::uint32_t a, std::uint32_t ap, std::uint32_t b, std::uint32_t bp,
                   std::uint32_t lanes) {
  for (int dir = 0; dir < 2; ++dir) {
    auto* l = topo->add_links();
    l->set_src_node(dir ? b : a);
    l->set_src_port(dir ? bp : ap);
    l->set_dst_node(dir ? a : b);
    l->set_dst_port(dir ? ap : bp);
    l->set_bw_gbps(25.0 * lanes);
    l->set_latency_ps(250000);
    l->set_lanes(lanes);
  }
}

// GPUs 0..G-1 (one port each), leaves G..G+L-1 (G/L GPU ports, then one uplink), spine G+L.
void fat_tree(const System& s, proto::Configure& cfg) {
  auto* topo = cfg.mutable_topology();
  const std::uint32_t per_leaf = s.gpus / s.leaves, spine = s.gpus + s.leaves;
  auto node = [&](std::uint32_t id, proto::NodeKind k, const std::string& name, std::uint32_t ports) {
    auto* n = topo->add_nodes();
    n->set_id(id);
    n->set_kind(k);
    n->set_name(name);
    n->set_num_ports(ports);
  };
  for (std::uint32_t g = 0; g < s.gpus; ++g) node(g, proto::NODE_GPU, "gpu" + std::to_string(g), 1);
  for (std::uint32_t l = 0; l < s.leaves; ++l) node(s.gpus + l, proto::NODE_SWITCH, "leaf" + std::to_string(l), per_leaf + 1);
  node(spine, proto::NODE_SWITCH, "spine", s.leaves);
  for (std::uint32_t g = 0; g < s.gpus; ++g) add_link_pair(topo, g, 0, s.gpus + g / per_leaf, g % per_leaf, 18);
  for (std::uint32_t l = 0; l < s.leaves; ++l) add_link_pair(topo, s.gpus + l, per_leaf, spine, l, 18 * per_leaf);
  for (std::uint32_t i = 0; i <= spine; ++i) {
    cfg.add_hosted_nodes(i);
    cfg.add_node_engine(0);
  }
}

proto::Configure make_config(const System& s) {
  proto::Configure cfg;
  if (s.leaves) {
    fat_tree(s, cfg);
  } else {
  auto* topo = cfg.mutable_topology();
  const std::uint32_t lanes[4] = {5, 4, 4, 5};
  for (std::uint32_t g = 0; g < s.gpus; ++g) {
    auto* n = topo->add_nodes();
    n->set_id(g);
    n->set_kind(proto::NODE_GPU);
    n->set_name("gpu" + std::to_string(g));
    n->set_num_ports(s.planes);
  }
  for (std::uint32_t w = 0; w < s.planes; ++w) {
    auto* n = topo->add_nodes();
    n->set_id(s.gpus + w);
    n->set_kind(proto::NODE_SWITCH);
    n->set_name("sw" + std::to_string(w));
    n->set_num_ports(s.gpus);
  }
  for (std::uint32_t g = 0; g < s.gpus; ++g)
    for (std::uint32_t w = 0; w < s.planes; ++w)
      for (int dir = 0; dir < 2; ++dir) {
        auto* l = topo->add_links();
        l->set_src_node(dir ? s.gpus + w : g);
        l->set_src_port(dir ? g : w);
        l->set_dst_node(dir ? g : s.gpus + w);
        l->set_dst_port(dir ? w : g);
        l->set_bw_gbps(25.0 * lanes[w % 4]);
        l->set_latency_ps(250000);
        l->set_lanes(lanes[w % 4]);
      }
  for (std::uint32_t i = 0; i < s.gpus + s.planes; ++i) {
    cfg.add_hosted_nodes(i);
    cfg.add_node_engine(0);
  }
  }
  auto& m = *cfg.mutable_params();
  m["host.gpu_model"] = pvs("feature_test");
  m["host.switch_model"] = pvs(s.switch_model);
  m["net.flit_bytes"] = pv(16);
  m["net.header_flits"] = pv(1);
  m["net.vcs_per_port"] = pv(4);
  m["net.vc_depth_flits"] = pv(256);
  m["net.routing_delay_ns"] = pvd(1);
  m["net.vc_alloc_delay_ns"] = pvd(1);
  m["net.sw_alloc_delay_ns"] = pvd(1);
  m["net.xbar_delay_ns"] = pvd(1);
  m["net.credit_delay_ns"] = pvd(0);
  m["net.stats_bin_ns"] = pvd(1000);
  m["net.sw_alloc_patience"] = pv(4);
  m["net.traffic_control"] = pvb(s.traffic_control);
  m["net.functional"] = pvb(true);
  m["net.features"] = pvs(s.features);
  m["net.nvls.multicast_delay_ns"] = pvd(2);
  m["net.nvls.reduce_delay_ns"] = pvd(4);
  m["net.nvls.member_acks"] = pvb(s.member_acks);
  m["net.group_sync.process_delay_ns"] = pvd(2);
  m["net.group_sync.table_entries"] = pv(4096);
  m["net.cais_merge.table_bytes"] = pv(s.table_bytes);
  m["net.cais_merge.table_entries"] = pv(s.table_entries);
  m["net.cais_merge.unlimited"] = pvb(s.unlimited);
  m["net.cais_merge.timeout_ns"] = pvd(s.timeout_ns);
  m["net.cais_merge.lookup_delay_ns"] = pvd(2);
  m["net.cais_merge.throttle"] = pvb(s.throttle);
  m["net.cais_merge.throttle_ahead_entries"] = pv(8);
  m["net.cais_merge.throttle_resume_entries"] = pv(2);
  m["net.cais_merge.throttle_hold_ns"] = pvd(1000);
  m["net.cais_merge.outstanding_cap"] = pvb(false);
  m["net.cais_merge.outstanding_cap_kb"] = pvd(1280);
  cfg.set_window_ps(250000);
  cfg.set_seed(1);
  return cfg;
}

Workload empty_workload(std::uint32_t gpus) {
  Workload w;
  w.sends.resize(gpus);
  w.red_rx.resize(gpus);
  w.ld_rx.resize(gpus);
  w.expected_rx.assign(gpus, 0);
  w.memory.resize(gpus);
  w.throttles.assign(gpus, 0);
  w.acks.assign(gpus, 0);
  w.releases.assign(gpus, 0);
  w.max_throttle_latency.assign(gpus, 0);
  w.max_ld_latency.assign(gpus, 0);
  return w;
}

struct Result {
  std::map<std::string, double> stats;
  double sum(const std::string& suffix) const {
    double s = 0;
    for (const auto& kv : stats)
      if (kv.first.size() >= suffix.size() && kv.first.compare(kv.first.size() - suffix.size(), suffix.size(), suffix) == 0)
        s += kv.second;
    return s;
  }
};

Result run(const System& s, Workload& w) {
  g_wl = &w;
  HostedModel m;
  m.configure(make_config(s));
  m.sim().run_until(kNever);
  EXPECT_TRUE(m.done()) << m.blocked_reason();
  m.check_drained();
  proto::Stats st;
  m.export_stats(&st);
  Result r;
  for (const auto& x : st.stats()) r.stats[x.name()] = x.value();
  g_wl = nullptr;
  return r;
}

// Random values exactly representable with room to spare: sums are exact in any order.
double exact_value(std::mt19937_64& rng) {
  return static_cast<double>(static_cast<std::int64_t>(rng() % 2001) - 1000) / 8.0;
}

// red.cais: every GPU contributes to every line homed elsewhere (ReduceScatter-like).
struct RedCase {
  std::uint32_t lines = 256, elems = 32;  // 32 x 4 B = one 128 B packet
  TimePs gap_ps = 20000;                  // between a GPU's issues
  TimePs skew_ps = 0;                     // max per-GPU start offset
  std::uint64_t seed = 7;
};

void build_red(const RedCase& c, std::uint32_t gpus, Workload& w, std::vector<std::vector<double>>& expect) {
  std::mt19937_64 rng(c.seed);
  expect.assign(c.lines, std::vector<double>(c.elems, 0.0));
  std::vector<TimePs> start(gpus);
  for (auto& t : start) t = c.skew_ps ? rng() % c.skew_ps : 0;
  for (std::uint32_t g = 0; g < gpus; ++g) {
    std::vector<std::uint32_t> order(c.lines);
    for (std::uint32_t i = 0; i < c.lines; ++i) order[i] = i;
    std::shuffle(order.begin(), order.end(), rng);
    TimePs t = start[g];
    for (std::uint32_t line : order) {
      const std::uint32_t home = line % gpus;
      if (home == g) continue;
      Send s;
      s.t = t;
      t += c.gap_ps + rng() % c.gap_ps;
      s.type = proto::PKT_CAIS_RED;
      s.dst = home;
      s.addr = (static_cast<std::uint64_t>(home) << 40) | (static_cast<std::uint64_t>(line) * 128);
      s.aux = gpus - 1;  // contributors: every GPU but the home
      s.count = 1;
      s.payload = c.elems * 4;
      s.group = 0;
      for (std::uint32_t e = 0; e < c.elems; ++e) {
        s.values.push_back(exact_value(rng));
        expect[line][e] += s.values.back();
      }
      w.sends[g].push_back(std::move(s));
    }
  }
  for (std::uint32_t line = 0; line < c.lines; ++line) w.expected_rx[line % gpus] += gpus - 1;  // contributions
}

// Checks that every line's home received exactly the sum, from exactly P-1 contributions.
void check_red(const RedCase& c, std::uint32_t gpus, const Workload& w, const std::vector<std::vector<double>>& expect) {
  for (std::uint32_t line = 0; line < c.lines; ++line) {
    const std::uint32_t home = line % gpus;
    const std::uint64_t addr = (static_cast<std::uint64_t>(home) << 40) | (static_cast<std::uint64_t>(line) * 128);
    auto it = w.red_rx[home].find(addr);
    ASSERT_NE(it, w.red_rx[home].end()) << "line " << line << " never reached its home";
    EXPECT_EQ(it->second.count, gpus - 1) << "line " << line;
    EXPECT_EQ(it->second.sum, expect[line]) << "line " << line;
  }
}

double merge_stat(const Result& r, const std::string& name) {
  double s = 0;
  for (const auto& kv : r.stats)
    if (kv.first.find(".cais_merge.") != std::string::npos && kv.first.size() > name.size() &&
        kv.first.compare(kv.first.size() - name.size() - 1, name.size() + 1, "." + name) == 0)
      s += kv.second;
  return s;
}

// One summary line per run (the numbers quoted in docs/VALIDATION.md, "In-switch features").
void summary(const char* what, const Result& r) {
  std::printf("[ summary  ] %s: hits %.0f misses %.0f completions %.0f evictions %.0f timeouts %.0f bypasses %.0f "
              "partial_flushes %.0f merged_writes %.0f bytes_saved %.0f throttles %.0f\n",
              what, merge_stat(r, "hits"), merge_stat(r, "misses"), merge_stat(r, "completions"),
              merge_stat(r, "evictions"), merge_stat(r, "timeouts"), merge_stat(r, "bypasses"),
              merge_stat(r, "partial_flushes"), merge_stat(r, "merged_writes"), merge_stat(r, "bytes_saved"),
              merge_stat(r, "throttles"));
}

TEST(FeatureAcceptance, RedCaisSumsAreExactThroughTheSwitches) {
  System sys;
  RedCase c;
  Workload w = empty_workload(sys.gpus);
  std::vector<std::vector<double>> expect;
  build_red(c, sys.gpus, w, expect);
  const Result r = run(sys, w);
  summary("red.cais, 40 KB/320-entry tables", r);
  check_red(c, sys.gpus, w, expect);
  EXPECT_GT(merge_stat(r, "hits"), 0);
  EXPECT_GT(merge_stat(r, "completions"), 0);
  EXPECT_GT(merge_stat(r, "bytes_saved"), 0);
  // Merging: far fewer packets reach the homes than were sent.
  std::uint64_t packets = 0;
  for (const auto& m : w.red_rx)
    for (const auto& kv : m) packets += kv.second.packets;
  EXPECT_LT(packets, static_cast<std::uint64_t>(c.lines) * (sys.gpus - 1));
}

TEST(FeatureAcceptance, RedCaisStaysExactWithEvictionsAndTimeouts) {
  System sys;
  sys.table_entries = 3;
  sys.timeout_ns = 300;
  RedCase c;
  c.skew_ps = 20'000'000;  // up to 20 us of drift between GPUs
  c.seed = 11;
  Workload w = empty_workload(sys.gpus);
  std::vector<std::vector<double>> expect;
  build_red(c, sys.gpus, w, expect);
  const Result r = run(sys, w);
  summary("red.cais, 3-entry tables, 300 ns timeout, 20 us drift", r);
  check_red(c, sys.gpus, w, expect);
  EXPECT_GT(merge_stat(r, "evictions"), 0);
  EXPECT_GT(merge_stat(r, "timeouts"), 0);
  EXPECT_GT(merge_stat(r, "partial_flushes"), 0);
  EXPECT_LE(merge_stat(r, "high_water_entries") / (4 * sys.gpus), 3.0);
}

// Unlimited tables with a timeout longer than the run: every line merges completely, whatever
// the drift, in one write per line; the high-water marks say how many entries a port needed
// (at most the lines homed at its GPU, here 32 per GPU over 4 planes).
TEST(FeatureAcceptance, UnlimitedTablesMergeEveryLineOnceAndRecordWhatTheyNeeded) {
  System sys;
  sys.table_entries = 3;  // ignored
  sys.unlimited = true;
  sys.timeout_ns = 1e9;
  RedCase c;
  c.skew_ps = 20'000'000;
  c.seed = 11;
  Workload w = empty_workload(sys.gpus);
  std::vector<std::vector<double>> expect;
  build_red(c, sys.gpus, w, expect);
  const Result r = run(sys, w);
  summary("red.cais, unlimited tables, 20 us drift", r);
  check_red(c, sys.gpus, w, expect);
  EXPECT_EQ(merge_stat(r, "evictions") + merge_stat(r, "timeouts") + merge_stat(r, "bypasses"), 0);
  EXPECT_EQ(merge_stat(r, "completions"), c.lines);
  EXPECT_EQ(merge_stat(r, "partial_flushes"), 0);
  double high = 0, high_bytes = 0;
  for (const auto& kv : r.stats) {
    if (kv.first.size() > 19 && kv.first.compare(kv.first.size() - 19, 19, ".high_water_entries") == 0)
      high = std::max(high, kv.second);
    if (kv.first.size() > 17 && kv.first.compare(kv.first.size() - 17, 17, ".high_water_bytes") == 0)
      high_bytes = std::max(high_bytes, kv.second);
  }
  std::printf("[ summary  ] largest table a port needed: %.0f entries, %.0f B; first-to-last wait, mean over ports of their mean: %.0f ns\n",
              high, high_bytes, merge_stat(r, "wait.mean") / (sys.gpus * sys.planes));
  EXPECT_GT(high, 3);  // more than the bounded run's tables held
  EXPECT_LE(high, c.lines / sys.gpus);
  EXPECT_EQ(high_bytes, high * 128);
}

// ld.cais: every GPU loads every line owned by another GPU (AllGather-like pull).
void ld_case(System sys, std::uint64_t seed, TimePs skew_ps, Result* out) {
  const std::uint32_t lines = 192, elems = 32;
  Workload w = empty_workload(sys.gpus);
  std::mt19937_64 rng(seed);
  std::vector<TimePs> start(sys.gpus);
  for (auto& t : start) t = skew_ps ? rng() % skew_ps : 0;
  std::map<std::uint64_t, std::pair<std::uint32_t, std::uint64_t>> want;  // tag -> (gpu, addr)
  for (std::uint32_t line = 0; line < lines; ++line) {
    const std::uint32_t owner = line % sys.gpus;
    const std::uint64_t addr = (static_cast<std::uint64_t>(owner) << 40) | (line * 128ull);
    auto& v = w.memory[owner][addr];
    for (std::uint32_t e = 0; e < elems; ++e) v.push_back(exact_value(rng));
  }
  std::uint64_t tag = 0;
  for (std::uint32_t g = 0; g < sys.gpus; ++g) {
    TimePs t = start[g];
    for (std::uint32_t line = 0; line < lines; ++line) {
      const std::uint32_t owner = line % sys.gpus;
      if (owner == g) continue;
      Send s;
      s.t = t;
      t += 10000 + rng() % 10000;
      s.type = proto::PKT_CAIS_LD_REQ;
      s.dst = owner;
      s.addr = (static_cast<std::uint64_t>(owner) << 40) | (line * 128ull);
      s.aux = sys.gpus - 1;  // requesters: every GPU but the owner
      s.count = elems * 4;
      s.tag = ++tag;
      want[s.tag] = {g, s.addr};
      w.sends[g].push_back(std::move(s));
      ++w.expected_rx[g];
    }
  }
  *out = run(sys, w);
  for (const auto& kv : want) {
    const auto& rx = w.ld_rx[kv.second.first];
    auto it = rx.find(kv.first);
    ASSERT_NE(it, rx.end()) << "tag " << kv.first << " never answered";
    EXPECT_EQ(it->second, w.memory[kv.second.second >> 40].at(kv.second.second));
  }
}

TEST(FeatureAcceptance, LdCaisAnswersEveryRequesterWithTheOwnersLine) {
  Result r;
  ld_case(System{}, 3, 0, &r);
  summary("ld.cais, 40 KB/320-entry tables", r);
  EXPECT_GT(merge_stat(r, "hits"), 0);
  EXPECT_GT(merge_stat(r, "bytes_saved"), 0);
}

TEST(FeatureAcceptance, LdCaisStaysCorrectWithEvictionsBypassesAndTimeouts) {
  System sys;
  sys.table_entries = 2;
  sys.timeout_ns = 300;
  Result r;
  ld_case(sys, 5, 20'000'000, &r);
  summary("ld.cais, 2-entry tables, 300 ns timeout, 20 us drift", r);
  EXPECT_GT(merge_stat(r, "evictions") + merge_stat(r, "bypasses"), 0);
  EXPECT_GT(merge_stat(r, "timeouts"), 0);
}

TEST(FeatureAcceptance, ThrottledRunStillCompletesExactly) {
  System sys;
  sys.throttle = true;
  RedCase c;
  c.skew_ps = 5'000'000;
  Workload w = empty_workload(sys.gpus);
  std::vector<std::vector<double>> expect;
  build_red(c, sys.gpus, w, expect);
  const Result r = run(sys, w);
  summary("red.cais with throttling (ahead 8, resume 2), 5 us drift", r);
  check_red(c, sys.gpus, w, expect);
  std::uint64_t throttles = 0;
  for (auto t : w.throttles) throttles += t;
  EXPECT_GT(throttles, 0u);  // the GPUs that started early were told (this GPU model ignores it)
  // Holds are renewed while a GPU stays ahead and lifted only while running; check_drained()
  // (in run) proved that no GPU is left counted ahead.
  EXPECT_LE(merge_stat(r, "unthrottles"), merge_stat(r, "throttles"));
  EXPECT_GT(merge_stat(r, "unthrottles"), 0);
}

// GPUs 1 and 2 ld.cais 640 lines from each of five owners at once, entries expecting a third
// requester (GPU 3) that comes only at 40 us, so both stay ahead and are throttled (1 us holds).
// GPU 3 meanwhile streams 2 KiB red.cais packets to GPU 2, so the answers the merge unit makes
// for GPU 2 pile up in output 2's replication queue. Returns the workload (latencies, counts)
// after checking every line.
Workload throttle_behind_answers(bool traffic_control) {
  System sys;
  sys.throttle = true;
  sys.traffic_control = traffic_control;
  sys.timeout_ns = 100000;  // no entry may time out before GPU 3 comes
  Workload w = empty_workload(sys.gpus);
  std::mt19937_64 rng(5);
  const std::uint32_t owners[] = {0, 4, 5, 6, 7}, lines = 640, elems = 32;
  std::uint64_t tag = 0;
  std::map<std::pair<std::uint32_t, std::uint64_t>, std::uint64_t> want;  // (gpu, tag) -> addr
  // A line of `owner` with random values, asked for by GPUs 1, 2 and 3 at the times given.
  auto line_asked = [&](std::uint32_t owner, std::uint64_t addr, const std::array<TimePs, 3>& at) {
    auto& mem = w.memory[owner][addr];
    for (std::uint32_t e = 0; e < elems; ++e) mem.push_back(exact_value(rng));
    for (std::uint32_t g = 1; g <= 3; ++g) {
      Send q;
      q.t = at[g - 1];
      q.type = proto::PKT_CAIS_LD_REQ;
      q.dst = owner;
      q.addr = addr;
      q.aux = 3;
      q.count = elems * 4;
      q.tag = ++tag;
      want[{g, q.tag}] = addr;
      w.sends[g].push_back(q);
      ++w.expected_rx[g];
    }
  };
  for (std::uint32_t line = 0; line < lines; ++line)
    for (std::uint32_t o : owners)
      line_asked(o, (static_cast<std::uint64_t>(o) << 40) | (line * 128ull), {0, 0, 40'000'000});
  // Later requests of GPU 2 (GPU 1's at once): each joins while GPU 2 is still ahead, so a new
  // THROTTLE goes out whenever the last hold has run out, while the answers are queued.
  for (std::uint32_t k = 0; k < 40; ++k)
    line_asked(0, (1ull << 30) | (k * 128ull), {0, 1'000'000 + k * 250'000, 40'000'000});
  for (std::uint32_t k = 0; k < 300; ++k) {
    Send r;
    r.type = proto::PKT_CAIS_RED;
    r.dst = 2;
    r.addr = (3ull << 40) | (k * 2048ull);
    r.aux = 1;  // complete on its own: forwarded, not merged
    r.count = 1;
    r.payload = 2048;
    r.values.assign(512, 1.0);
    w.sends[3].push_back(std::move(r));
    ++w.expected_rx[2];
  }
  for (auto& v : w.sends) std::stable_sort(v.begin(), v.end(), [](const Send& a, const Send& b) { return a.t < b.t; });
  run(sys, w);
  for (const auto& kv : want) EXPECT_EQ(w.ld_rx[kv.first.first].at(kv.first.second), w.memory[kv.second >> 40].at(kv.second));
  EXPECT_GT(w.throttles[2], 4u + 20);  // the first at each switch, then one per run-out hold
  return w;
}

TEST(FeatureAcceptance, UnderTrafficControlThrottlesPassTheAnswersQueuedForTheirGpu) {
  const TimePs zero_load = 256'000;  // a 1-flit packet: 250 ns link + the switch's stages
  const Workload tc = throttle_behind_answers(true);
  const Workload shared = throttle_behind_answers(false);
  std::printf("[ summary  ] throttle to GPU 2 behind its queued answers: max latency %.0f ns with traffic control, "
              "%.0f ns without; its answers up to %.0f / %.0f us\n",
              tc.max_throttle_latency[2] / 1e3, shared.max_throttle_latency[2] / 1e3, tc.max_ld_latency[2] / 1e6,
              shared.max_ld_latency[2] / 1e6);
  EXPECT_GT(tc.max_ld_latency[2], 5'000'000u);  // the backlog was real
  EXPECT_LT(tc.max_throttle_latency[2], zero_load + 20'000);
  // Without traffic control control packets share the responses' FIFO (spec 3.6 (3)'s table).
  EXPECT_GT(shared.max_throttle_latency[2], 1'000'000u);
}

void nvls_case(System sys, bool member_acks) {
  {
    sys.member_acks = member_acks;
    Workload w = empty_workload(sys.gpus);
    w.member_acks = member_acks;
    std::mt19937_64 rng(21);
    const std::uint32_t lines = 16, elems = 32;
    std::map<std::uint64_t, std::vector<double>> red_sum, ld_sum;
    std::uint64_t tag = 0;
    for (std::uint32_t g = 0; g < sys.gpus; ++g)
      for (std::uint32_t line = 0; line < lines; ++line) {
        const std::uint64_t addr = (1ull << 50) | (line * 128ull);
        Send s;
        s.t = 1000 * (line + g);
        s.type = proto::PKT_MM_RED;
        s.dst = g;
        s.addr = addr;
        s.aux = sys.gpus;
        s.payload = elems * 4;
        s.tag = ++tag;
        auto& sum = red_sum[addr];
        sum.resize(elems, 0.0);
        for (std::uint32_t e = 0; e < elems; ++e) {
          s.values.push_back(exact_value(rng));
          sum[e] += s.values.back();
        }
        w.sends[g].push_back(std::move(s));
        ++w.expected_rx[g];  // its ack
        for (std::uint32_t m = 0; m < sys.gpus; ++m) ++w.expected_rx[m];  // every member gets a copy
        // the line ld_reduce reads from every member
        const std::uint64_t la = (2ull << 50) | (line * 128ull);
        auto& mem = w.memory[g][la];
        auto& ls = ld_sum[la];
        ls.resize(elems, 0.0);
        for (std::uint32_t e = 0; e < elems; ++e) {
          mem.push_back(exact_value(rng));
          ls[e] += mem.back();
        }
      }
    std::map<std::uint64_t, std::pair<std::uint32_t, std::uint64_t>> want;
    for (std::uint32_t line = 0; line < lines; ++line) {
      const std::uint32_t g = line % sys.gpus;
      Send s;
      s.t = 200'000 + 1000 * line;
      s.type = proto::PKT_MM_LD_REDUCE_REQ;
      s.dst = g;
      s.addr = (2ull << 50) | (line * 128ull);
      s.aux = sys.gpus;
      s.count = elems * 4;
      s.tag = ++tag;
      want[s.tag] = {g, s.addr};
      w.sends[g].push_back(std::move(s));
      ++w.expected_rx[g];
    }
    for (auto& v : w.sends) std::stable_sort(v.begin(), v.end(), [](const Send& a, const Send& b) { return a.t < b.t; });
    const Result r = run(sys, w);
    for (std::uint32_t m = 0; m < sys.gpus; ++m)
      for (const auto& kv : red_sum) {
        const auto it = w.red_rx[m].find(kv.first);
        ASSERT_NE(it, w.red_rx[m].end());
        EXPECT_EQ(it->second.packets, sys.gpus);
        EXPECT_EQ(it->second.sum, kv.second) << "member " << m;
      }
    for (const auto& kv : want) EXPECT_EQ(w.ld_rx[kv.second.first].at(kv.first), ld_sum.at(kv.second.second));
    for (std::uint32_t g = 0; g < sys.gpus; ++g) EXPECT_EQ(w.acks[g], lines);
    EXPECT_EQ(r.sum(".nvls.copies"), static_cast<double>(sys.gpus) * sys.gpus * lines);
  }
}

TEST(FeatureAcceptance, NvlsMulticastReductionAndLdReduce) {
  for (bool member_acks : {false, true}) nvls_case(System{}, member_acks);
}

TEST(FeatureAcceptance, NvlsOnATwoLevelFabric) {
  System sys;
  sys.gpus = 16;
  sys.leaves = 2;
  for (bool member_acks : {false, true}) nvls_case(sys, member_acks);
}

TEST(FeatureAcceptance, TwoLevelFabricKeepsSumsAndLinesExactEvenWhenEveryLeafMerges) {
  System sys;
  sys.gpus = 16;
  sys.leaves = 2;
  sys.switch_model = "nvswitch_flat";
  RedCase c;
  c.lines = 128;
  c.skew_ps = 2'000'000;
  Workload w = empty_workload(sys.gpus);
  std::vector<std::vector<double>> expect;
  build_red(c, sys.gpus, w, expect);
  const Result r = run(sys, w);
  summary("red.cais, 16 GPUs, 2 leaves + spine, every leaf merges", r);
  check_red(c, sys.gpus, w, expect);
  EXPECT_GT(merge_stat(r, "hits"), 0);
  Result l;
  ld_case(sys, 9, 2'000'000, &l);
  summary("ld.cais, 16 GPUs, 2 leaves + spine, every leaf merges", l);
  EXPECT_GT(merge_stat(l, "hits"), 0);
}

TEST(FeatureAcceptance, TwoLevelFabricMergesAtTheHomesLeafWhenTheRouterSaysWhereItIs) {
  System sys;
  sys.gpus = 16;
  sys.leaves = 2;
  sys.switch_model = "nvswitch_routed";
  RedCase c;
  c.lines = 128;
  c.skew_ps = 2'000'000;
  Workload w = empty_workload(sys.gpus);
  std::vector<std::vector<double>> expect;
  build_red(c, sys.gpus, w, expect);
  const Result r = run(sys, w);
  summary("red.cais, 16 GPUs, 2 leaves + spine, merge at the home's leaf", r);
  check_red(c, sys.gpus, w, expect);
  EXPECT_EQ(merge_stat(r, "completions"), c.lines);  // every line merged completely, once
  EXPECT_EQ(merge_stat(r, "timeouts"), 0);
  Result l;
  ld_case(sys, 9, 2'000'000, &l);
  summary("ld.cais, 16 GPUs, 2 leaves + spine, merge at the owner's leaf", l);
  EXPECT_EQ(merge_stat(l, "completions"), 192);
}

void sync_case(const System& sys, const std::vector<std::uint32_t>& sync_switches) {
  Workload w = empty_workload(sys.gpus);
  w.sync_switches = sync_switches;
  std::mt19937_64 rng(4);
  const std::uint32_t groups = 40;
  for (std::uint32_t g = 0; g < sys.gpus; ++g) {
    for (std::uint32_t k = 0; k < groups; ++k) {
      Send s;
      s.t = rng() % 5'000'000;
      s.type = proto::PKT_SYNC_REQ;
      s.dst = g;
      s.group = 1000 + k;
      s.aux = sys.gpus;
      s.tag = k;
      w.sends[g].push_back(std::move(s));
      ++w.expected_rx[g];
    }
    std::stable_sort(w.sends[g].begin(), w.sends[g].end(), [](const Send& a, const Send& b) { return a.t < b.t; });
  }
  const Result r = run(sys, w);
  for (std::uint32_t g = 0; g < sys.gpus; ++g) EXPECT_EQ(w.releases[g], groups);
  EXPECT_EQ(r.sum(".group_sync.groups_released"), groups);
}

TEST(FeatureAcceptance, GroupSyncReleasesAllGpusOfEachGroup) { sync_case(System{}, {}); }

TEST(FeatureAcceptance, GroupSyncOnATwoLevelFabricAtOneSwitchPerGroup) {
  System sys;
  sys.gpus = 16;
  sys.leaves = 2;
  sync_case(sys, {16, 17, 18});  // both leaves and the spine keep some of the groups
}

}  // namespace
}  // namespace cais::net
