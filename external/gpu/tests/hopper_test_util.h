// Helpers of the Hopper GPU's unit tests: a "probe" switch model (registered here, tests only)
// that records every packet a GPU sends and answers requests the simplest correct way, small
// parameter sets, one-kernel workloads and a runner that returns every statistic.
#pragma once
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <set>

#include "cais/engine_host.h"
#include "cais/errors.h"
#include "cais/gpu/hopper_gpu.h"
#include "cais/link.h"

namespace cais::gpu::test {


struct Seen {
  proto::PacketType type;
  std::uint32_t src, dst, payload, group, aux, count;
  std::uint64_t addr;
  std::vector<double> values;
  std::vector<std::uint64_t> line_addrs;  // every line of a (bulk) packet, line 0 first
};
inline std::vector<Seen>& seen() {
  static std::vector<Seen> s;
  return s;
}
inline bool& probe_throttles() {  // the probe throttles a GPU's first .cais group ...
  static bool on = false;
  return on;
}
inline bool& probe_throttles_every_group() {  // ... (or each group, once, at its first request) ...
  static bool on = false;
  return on;
}
inline std::uint32_t& probe_throttle_hold_ns() {  // ... asking for a hold of this many ns ...
  static std::uint32_t ns = 10000;
  return ns;
}
inline bool& probe_lifts() {  // ... and lifts it after 5 us (else the hold runs out)
  static bool on = true;
  return on;
}
inline bool& cache_remote_reads() {  // gpu.cache_remote_reads (off unless a test turns it on)
  static bool on = false;
  return on;
}
inline bool& probe_red_acks() {  // the probe acks every mergeable red.cais (aux >= 2) ...
  static bool on = false;
  return on;
}
inline TimePs& probe_red_acks_from_ps() {  // ... not before this time (acks held back until then)
  static TimePs t = 0;
  return t;
}

class ProbeSwitch : public NodeComponent {
 public:
  ProbeSwitch(Sim& sim, std::uint32_t node) : NodeComponent(sim, sim.node(node).name, node << 8), node_(node) {
    const Params& p = sim.params();
    flit_ = static_cast<std::uint32_t>(p.get_uint("net.flit_bytes"));
    hdr_ = static_cast<std::uint32_t>(p.get_uint("net.header_flits"));
    const VcLayout layout = VcLayout::of(sim);
    const std::uint32_t vcs = layout.vcs;
    const auto& info = sim.node(node);
    out_.resize(info.out.size());
    in_.resize(info.out.size());
    q_.resize(info.out.size());
    for (std::uint32_t i = 0; i < info.out.size(); ++i) {
      out_[i].init(info.out[i], vcs, layout.depth(info.out[i]), flit_, 1000000);
      in_[i].init(node, i, info.out[i], vcs, layout.depth(info.out[i]), 0);
    }
  }
  void handle(const Event& e) override {
    if (e.kind == 2) return pump(e.arg32);
    if (e.kind == 3) return throttle(e.arg32, static_cast<std::uint32_t>(e.arg), false);
    if (e.kind == 4) {  // a held-back CAIS_RED_ACK goes out
      q_[e.arg32].push_back(static_cast<PacketHandle>(e.arg));
      return pump(e.arg32);
    }
    const PacketHandle h = static_cast<PacketHandle>(e.arg);
    Packet& p = sim_.packets()[h];
    const std::uint32_t port = p.hop_port;
    if (p.type == proto::PKT_CREDIT) {
      out_[port].return_credits(p.vc, p.count);
      sim_.packets().release(h);
      return pump(port);
    }
    in_[port].accept(sim_, h);
    in_[port].pop(sim_, *this, p.vc);
    seen().push_back({p.type, p.src, p.dst, p.payload_bytes, p.group, p.aux, p.count, p.addr, p.values, {}});
    for (std::uint32_t i = 0; i < p.lines; ++i) seen().back().line_addrs.push_back(p.line_addr(i));
    if (probe_throttles() && p.type == proto::PKT_CAIS_LD_REQ &&
        (probe_throttles_every_group() ? throttled_.insert(p.group).second : throttled_.empty())) {
      throttled_.insert(p.group);
      throttle(port, p.group, true);
      if (probe_lifts()) schedule(sim_.now() + 5000000, 3, p.group, port);
    }
    if (probe_red_acks() && p.type == proto::PKT_CAIS_RED && p.aux >= 2) {
      const std::uint32_t src = p.src, lines = p.lines;
      const PacketHandle r = sim_.new_packet(*this);
      Packet& q = sim_.packets()[r];
      q.type = proto::PKT_CAIS_RED_ACK;
      q.src = q.origin = node_;
      q.dst = src;
      q.count = lines;
      q.flits = flits_for(0, flit_, hdr_);
      schedule(std::max(sim_.now(), probe_red_acks_from_ps()), 4, r, port);
    }
    proto::PacketType reply = proto::PKT_UNSPECIFIED;
    std::uint32_t bytes = 0;
    switch (p.type) {
      case proto::PKT_READ_REQ: reply = proto::PKT_READ_RESP; bytes = p.aux; break;
      case proto::PKT_CAIS_LD_REQ: reply = proto::PKT_CAIS_LD_RESP; bytes = p.count; break;
      case proto::PKT_MM_LD_REDUCE_REQ: reply = proto::PKT_MM_LD_REDUCE_RESP; bytes = p.count; break;
      case proto::PKT_WRITE: reply = proto::PKT_WRITE_ACK; break;
      case proto::PKT_SYNC_REQ: reply = proto::PKT_SYNC_RELEASE; break;
      case proto::PKT_MM_ST:
      case proto::PKT_MM_RED: reply = proto::PKT_MM_ACK; break;
      default: break;
    }
    if (reply != proto::PKT_UNSPECIFIED) {
      const PacketHandle r = sim_.new_packet(*this);
      Packet& q = sim_.packets()[r];
      const Packet& req = sim_.packets()[h];
      q.type = reply;
      q.src = node_;
      q.dst = req.src;
      q.addr = req.addr;
      q.tag = req.tag;
      q.group = req.group;
      q.inject_ps = req.inject_ps;
      q.copy_lines(req);  // a bulk request is answered line for line
      q.payload_bytes = bytes;
      q.flits = flits_for(bytes, flit_, hdr_);
      q_[port].push_back(r);
      pump(port);
    }
    sim_.packets().release(h);
  }
  bool done() const override { return true; }

 private:
  void pump(std::uint32_t port) {
    if (q_[port].empty() || !out_[port].idle_at(sim_.now())) return;
    const PacketHandle r = q_[port].front();
    if (!out_[port].has_credits(1, sim_.packets()[r].flits)) return;
    q_[port].pop_front();
    schedule(out_[port].transmit(sim_, *this, r, 1), 2, 0, port);
  }
  void throttle(std::uint32_t port, std::uint32_t group, bool on) {
    const PacketHandle r = sim_.new_packet(*this);
    Packet& q = sim_.packets()[r];
    q.type = proto::PKT_THROTTLE;
    q.src = q.origin = node_;
    q.dst = port;
    q.group = group;
    q.aux = on ? probe_throttle_hold_ns() : 0;
    q.flits = flits_for(0, flit_, hdr_);
    q_[port].push_back(r);
    pump(port);
  }
  std::set<std::uint32_t> throttled_;  // the groups throttled so far
  std::uint32_t node_, flit_ = 16, hdr_ = 1;
  std::vector<OutputChannel> out_;
  std::vector<InputBuffer> in_;
  std::vector<std::deque<PacketHandle>> q_;
};

inline const bool probe_registered = [] {
  NodeFactory f;
  f.engine = "net";
  f.build = [](Sim& sim, std::uint32_t node) { return std::make_unique<ProbeSwitch>(sim, node); };
  NodeRegistry::instance().add(proto::NODE_SWITCH, "probe", std::move(f));
  return true;
}();

// ---------------------------------------------------------------- helpers
inline void set_gpu_defaults(proto::Configure& c, std::uint32_t sms = 4) {
  auto put_d = [&](const std::string& k, double v) { (*c.mutable_params())[k].set_d(v); };
  auto put_i = [&](const std::string& k, std::int64_t v) { (*c.mutable_params())[k].set_i(v); };
  put_i("gpu.num_sms", sms);
  put_d("gpu.clock_mhz", 1000.0);  // 1 GHz: 1 cycle = 1 ns
  put_d("gpu.clock_mhz_without_mma", 0.0);  // the same clock whatever runs
  put_i("gpu.tc_flops_per_cycle_per_sm", 4096);
  put_i("gpu.alu_flops_per_cycle_per_sm", 256);
  put_i("gpu.max_blocks_per_sm", 32);
  put_i("gpu.max_threads_per_sm", 2048);
  put_i("gpu.regs_per_sm", 65536);
  put_d("gpu.smem_per_sm_kb", 228.0);
  put_d("gpu.l1_smem_per_sm_kb", 256.0);
  {
    auto* list = (*c.mutable_params())["gpu.smem_configs_kb"].mutable_list();
    list->clear_items();
    for (const double kb : {0.0, 8.0, 16.0, 32.0, 64.0, 100.0, 132.0, 164.0, 196.0, 228.0}) list->add_items()->set_d(kb);
  }
  put_d("gpu.l2_size_mb", 50.0);
  put_d("gpu.l2_bw_gbps", 1000.0);  // 1 B/ps
  put_d("gpu.l2_latency_ns", 100.0);
  put_d("gpu.sm_load_bytes_per_cycle", 1000.0);
  put_d("gpu.sm_store_bytes_per_cycle", 1000.0);
  put_d("gpu.warp_load_bytes_per_cycle", 1000.0);
  put_d("gpu.hbm_bw_gbps", 500.0);
  put_d("gpu.hbm_latency_ns", 400.0);
  for (const char* k : {"gpu.hbm_load_util", "gpu.hbm_load_read_ns", "gpu.hbm_load_copy_ns"}) {
    auto* list = (*c.mutable_params())[k].mutable_list();  // no loaded latency
    list->clear_items();
    list->add_items()->set_d(0.0);
  }
  put_d("gpu.hbm_load_window_ns", 1000.0);
  put_i("gpu.max_outstanding_per_sm", 64);
  put_i("gpu.dma_max_outstanding", 64);
  c.mutable_params()->operator[]("gpu.posted_stores").set_b(true);
  c.mutable_params()->operator[]("gpu.cache_remote_reads").set_b(cache_remote_reads());
  put_i("gpu.max_packet_bytes", 128);
  put_i("gpu.bulk_lines", 1);
  put_d("gpu.launch_skew_ns", 0.0);
  put_d("gpu.block_jitter_frac", 0.0);
  put_i("gpu.tb_order_window", 1);
  put_d("gpu.clock_spread_frac", 0.0);
  put_d("gpu.tc_efficiency", 1.0);
  put_d("gpu.alu_efficiency", 1.0);
  put_d("gpu.hbm_efficiency", 1.0);
  put_d("gpu.tb_overhead_ns", 10.0);
  put_d("gpu.kernel_launch_ns", 1000.0);
  put_i("gpu.max_clusters_4", 0);
  put_i("net.flit_bytes", 16);
  put_i("net.header_flits", 1);
  put_d("net.credit_delay_ns", 1.0);  // the GPU sizes its bulk packets to the credit loop
  put_i("net.vcs_per_port", 4);
  put_i("net.vc_depth_flits", 256);
  (*c.mutable_params())["net.traffic_control"].set_b(false);
  (*c.mutable_params())["host.gpu_model"].set_s("hopper");
  (*c.mutable_params())["host.switch_model"].set_s("probe");
}

// `gpus` GPUs; with a probe switch (node gpus) linked to every GPU's port 0 when `probe`.
inline proto::Configure make_config(const isa::Workload& wl, std::uint32_t gpus, bool probe) {
  proto::Configure c;
  set_gpu_defaults(c);
  for (std::uint32_t g = 0; g < gpus; ++g) {
    auto* n = c.mutable_topology()->add_nodes();
    n->set_id(g);
    n->set_kind(proto::NODE_GPU);
    n->set_name("gpu" + std::to_string(g));
    n->set_num_ports(probe ? 1 : 0);
    c.add_hosted_nodes(g);
    c.add_node_engine(0);
  }
  if (probe) {
    // the probe answers multicast and group sync as switches with these features do
    (*c.mutable_params())["net.features"].set_s("nvls,group_sync");
    auto* n = c.mutable_topology()->add_nodes();
    n->set_id(gpus);
    n->set_kind(proto::NODE_SWITCH);
    n->set_name("probe");
    n->set_num_ports(gpus);
    c.add_hosted_nodes(gpus);
    c.add_node_engine(0);
    for (std::uint32_t g = 0; g < gpus; ++g)
      for (int dir = 0; dir < 2; ++dir) {
        auto* l = c.mutable_topology()->add_links();
        l->set_src_node(dir ? gpus : g);
        l->set_src_port(dir ? g : 0);
        l->set_dst_node(dir ? g : gpus);
        l->set_dst_port(dir ? 0 : g);
        l->set_bw_gbps(100.0);
        l->set_latency_ps(250000);
        l->set_lanes(4);
      }
  }
  c.set_workload(wl.SerializeAsString());
  return c;
}

// Replace the probe switch of make_config(..., probe = true) by the NVSwitch router with the
// harness's default network parameters (harness/params/net.py) and `features`.
inline void use_nvswitch(proto::Configure& c, const std::string& features = "", bool member_acks = false) {
  auto& m = *c.mutable_params();
  m["host.switch_model"].set_s("nvswitch");
  m["net.vcs_per_port"].set_i(8);
  m["net.vc_depth_flits"].set_i(256);
  m["net.vc_buffer_scope"].set_s("lane");
  for (const char* k : {"net.routing_delay_ns", "net.vc_alloc_delay_ns", "net.sw_alloc_delay_ns", "net.xbar_delay_ns",
                        "net.credit_delay_ns"})
    m[k].set_d(1.0);
  m["net.stats_bin_ns"].set_d(1000.0);
  m["net.sw_alloc_patience"].set_i(2);
  m["net.functional"].set_b(true);
  m["net.features"].set_s(features);
  if (features.find("nvls") != std::string::npos) {
    m["net.nvls.multicast_delay_ns"].set_d(10.0);
    m["net.nvls.reduce_delay_ns"].set_d(10.0);
    m["net.nvls.member_acks"].set_b(member_acks);
  }
}

// Run a configuration to the end; statistics by name ("end": the final time).
inline std::map<std::string, double> run_config(HostedModel& h, const proto::Configure& c) {
  h.configure(c);
  h.sim().run_until(kNever);
  EXPECT_TRUE(h.done()) << h.blocked_reason();
  h.check_drained();
  proto::Stats s;
  h.export_stats(&s);
  std::map<std::string, double> st;
  for (const auto& x : s.stats()) st[x.name()] = x.value();
  st["end"] = static_cast<double>(h.sim().now());
  return st;
}

struct RunResult {
  std::unique_ptr<HostedModel> m;
  std::map<std::string, double> stats;
  const HopperGpu& gpu(std::uint32_t i) const { return *dynamic_cast<const HopperGpu*>(m->nodes()[i].get()); }
};

inline RunResult run(const isa::Workload& wl, std::uint32_t gpus = 1, bool probe = false) {
  seen().clear();
  RunResult r;
  r.m = std::make_unique<HostedModel>();
  r.m->configure(make_config(wl, gpus, probe));
  r.m->sim().run_until(kNever);
  EXPECT_TRUE(r.m->done()) << r.m->blocked_reason();
  r.m->check_drained();
  proto::Stats st;
  r.m->export_stats(&st);
  for (const auto& s : st.stats()) r.stats[s.name()] = s.value();
  r.stats["end"] = static_cast<double>(r.m->sim().now());
  return r;
}

// Configuring with `c` fails with a ConfigError whose text contains `part`.
inline void expect_config_error(const proto::Configure& c, const std::string& part) {
  HostedModel h;
  try {
    h.configure(c);
    ADD_FAILURE() << "expected a ConfigError about " << part;
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

// The same for `wl` on one GPU without ports.
inline void expect_config_error(const isa::Workload& wl, const std::string& part) {
  expect_config_error(make_config(wl, 1, false), part);
}

inline isa::Workload one_kernel(std::uint32_t gpus = 1, std::uint32_t grid = 1, bool functional = false) {
  isa::Workload wl;
  wl.set_name("t");
  wl.set_num_gpus(gpus);
  wl.set_functional(functional);
  auto* b = wl.add_buffers();
  b->set_name("X");
  b->set_bytes(1 << 20);
  b->set_dtype(isa::FP32);
  auto* mc = wl.add_buffers();
  mc->set_name("MC");
  mc->set_bytes(1 << 16);
  mc->set_dtype(isa::FP32);
  mc->set_multicast(true);
  auto* k = wl.add_kernels();
  k->set_name("k");
  k->set_grid_x(grid);
  k->set_grid_y(1);
  k->set_threads_per_block(128);
  k->set_regs_per_thread(32);
  wl.add_launches()->set_kernel(0);
  return wl;
}

// A further kernel of `wl`: grid gx x gy of 128-thread blocks, 32 registers per thread, no program yet.
inline isa::Kernel* add_kernel(isa::Workload& wl, const std::string& name, std::uint32_t gx = 1, std::uint32_t gy = 1) {
  auto* k = wl.add_kernels();
  k->set_name(name);
  k->set_grid_x(gx);
  k->set_grid_y(gy);
  k->set_threads_per_block(128);
  k->set_regs_per_thread(32);
  return k;
}

inline isa::Instr* add(isa::Workload& wl, isa::Opcode op) {
  auto* i = wl.mutable_kernels(0)->add_program();
  i->set_op(op);
  return i;
}

inline isa::Instr* add_mma(isa::Workload& wl, std::uint32_t m, std::uint32_t n, std::uint32_t k) {
  auto* i = add(wl, isa::MMA);
  i->set_m(m);
  i->set_n(n);
  i->set_k(k);
  return i;
}

inline isa::Instr* mem(isa::Workload& wl, isa::Opcode op, std::uint32_t rows, std::uint32_t row_bytes, std::uint64_t stride,
                std::int64_t base = 0, std::int64_t peer = 0) {
  auto* i = add(wl, op);
  i->set_rows(rows);
  i->set_row_bytes(row_bytes);
  i->set_row_stride(stride);
  i->mutable_addr()->set_base(base);
  i->mutable_peer()->set_base(peer);
  return i;
}

}  // namespace cais::gpu::test
