// Collective schedules (pure data) and the "collective" GPU model end to end, against a minimal
// stand-in switch defined here (ideal output-queued crossbar with NVLS multicast and
// ld_reduce) so that the GPU side is tested independently of the router under development.
// The same checks run against the real router in test_collective_nvswitch.cc.
#include <gtest/gtest.h>

#include <array>
#include <iostream>
#include <deque>
#include <map>
#include <memory>

#include "cais/engine_host.h"
#include "cais/errors.h"
#include "cais/link.h"
#include "cais/net/collective_schedule.h"
#include "cais/sim.h"

namespace cais::net {
namespace {

// ------------------------------------------------------------------ schedules
std::uint64_t sent_bytes(CollOp op, std::uint32_t n, std::uint32_t rank, std::uint64_t bytes, std::uint32_t ch,
                         std::uint64_t chunk) {
  RingParams p;
  p.op = op;
  p.nranks = n;
  p.bytes = bytes;
  p.channels = ch;
  p.chunk_bytes = chunk;
  return ring_bytes_sent_per_rank(build_ring_schedule(p, rank));
}

TEST(CollectiveSchedule, RingBytesMatchAnalyticalCounts) {
  for (std::uint32_t n : {2u, 3u, 4u, 8u}) {
    for (std::uint64_t chunk : {4096ull, 65536ull, 1ull << 20}) {
      const std::uint64_t bytes = 3ull * 1024 * 1024 * n;  // divisible by n and 16
      // Every block crosses n-1 links in each ring phase: the sum over ranks is exact; with
      // alignment (16 B) of unequal last blocks, every rank's share is within a few bytes.
      std::uint64_t ar = 0;
      for (std::uint32_t r = 0; r < n; ++r) {
        const std::uint64_t mine = sent_bytes(CollOp::kAllReduce, n, r, bytes, 5, chunk);
        ar += mine;
        EXPECT_NEAR(static_cast<double>(mine), 2.0 * (n - 1) * bytes / n, 16.0 * 5 * n) << n << " " << chunk;
        EXPECT_EQ(sent_bytes(CollOp::kAllGather, n, r, bytes, 5, chunk), (n - 1) * bytes / n);
        EXPECT_EQ(sent_bytes(CollOp::kReduceScatter, n, r, bytes, 5, chunk), (n - 1) * bytes / n);
      }
      EXPECT_EQ(ar, 2 * (n - 1) * bytes);
    }
  }
}

TEST(CollectiveSchedule, SendsOfARankPairWithReceivesOfTheNext) {
  for (CollOp op : {CollOp::kAllReduce, CollOp::kAllGather, CollOp::kReduceScatter}) {
    const std::uint32_t n = 4;
    RingParams p;
    p.op = op;
    p.nranks = n;
    p.bytes = 1000 * 1024;
    p.channels = 3;
    p.chunk_bytes = 32768;
    for (std::uint32_t r = 0; r < n; ++r) {
      const auto a = build_ring_schedule(p, r), b = build_ring_schedule(p, (r + 1) % n);
      for (std::uint32_t c = 0; c < p.channels; ++c) {
        std::vector<std::pair<std::uint64_t, std::uint64_t>> sends, recvs;
        for (const auto& o : a.channels[c])
          if (prim_send(o.prim)) sends.emplace_back(o.offset, o.bytes);
        for (const auto& o : b.channels[c])
          if (prim_recv(o.prim)) recvs.emplace_back(o.offset, o.bytes);
        EXPECT_EQ(sends, recvs) << "rank " << r << " channel " << c;
      }
    }
  }
}

TEST(CollectiveSchedule, NvlsTwoShotCoversTheBufferOnce) {
  const std::uint32_t n = 8;
  const std::uint64_t bytes = 5'000'000 / 16 * 16;
  std::vector<int> seen(bytes / 16, 0);
  for (std::uint32_t r = 0; r < n; ++r)
    for (const auto& ch : build_nvls_schedule(bytes, n, r, 4, 131072, 16))
      for (const auto& rg : ch)
        for (std::uint64_t o = rg.offset; o < rg.offset + rg.bytes; o += 16) seen[o / 16]++;
  for (int s : seen) ASSERT_EQ(s, 1);
}

// ------------------------------------------------------------------ stand-in switch
std::uint32_t wire_flits(std::uint64_t payload) {
  if (payload == 0) return 1;
  return static_cast<std::uint32_t>((payload / 128) * 9 + (payload % 128 ? 1 + (payload % 128 + 15) / 16 : 0));
}

class StandInSwitch : public NodeComponent {
 public:
  StandInSwitch(Sim& sim, std::uint32_t node) : NodeComponent(sim, sim.node(node).name, node << 8), node_(node) {
    const auto& info = sim.node(node);
    out_.resize(info.out.size());
    in_.resize(info.out.size());
    q_.resize(info.out.size());
    for (std::uint32_t p = 0; p < info.out.size(); ++p) {
      const auto depth = static_cast<std::uint32_t>(sim.params().get_uint("net.vc_depth_flits"));
      out_[p].init(info.out[p], 2, depth, 16, 1000000);
      in_[p].init(node, p, info.out[p], 2, depth, 0);
      out_[p].register_stats(sim.stats(), name() + ".port" + std::to_string(p) + ".tx");
    }
  }
  void handle(const Event& e) override {
    if (e.kind == 2) return pump(e.arg32);
    const PacketHandle h = static_cast<PacketHandle>(e.arg);
    if (sim_.packets()[h].type == proto::PKT_CREDIT) {
      const Packet& c = sim_.packets()[h];
      const std::uint32_t port = c.hop_port;
      out_[port].return_credits(c.vc, c.count);
      sim_.packets().release(h);
      return pump(port);
    }
    in_[sim_.packets()[h].hop_port].accept(sim_, h);
    in_[sim_.packets()[h].hop_port].pop(sim_, *this, sim_.packets()[h].vc);
    const Packet p = sim_.packets()[h];  // a copy: allocating below may move the pool
    switch (p.type) {
      case proto::PKT_MM_LD_REDUCE_REQ: {
        const std::uint64_t id = next_id_++;
        Pending& e2 = pending_[id];
        e2.requester = p.src;
        e2.tag = p.tag;
        e2.addr = p.addr;
        e2.bytes = p.count;
        e2.left = p.aux;
        for (std::uint32_t g = 0; g < p.aux; ++g) {
          const PacketHandle r = sim_.new_packet(*this);
          Packet& q = sim_.packets()[r];
          q.type = proto::PKT_READ_REQ;
          q.src = node_;
          q.dst = g;
          q.addr = p.addr;
          q.count = p.count;
          q.tag = id;
          q.flits = std::max<std::uint32_t>(1, (p.count + 127) / 128);
          enqueue(r, g, 0);
        }
        sim_.packets().release(h);
        return;
      }
      case proto::PKT_READ_RESP: {
        auto it = pending_.find(p.tag);
        if (it == pending_.end()) throw InvariantError("stand-in switch: unknown read response");
        Pending& e2 = it->second;
        if (e2.sum.empty()) e2.sum.assign(p.values.size(), 0.0);
        for (std::size_t k = 0; k < p.values.size(); ++k) e2.sum[k] += p.values[k];
        sim_.packets().release(h);
        if (--e2.left) return;
        const PacketHandle r = sim_.new_packet(*this);
        Packet& q = sim_.packets()[r];
        q.type = proto::PKT_MM_LD_REDUCE_RESP;
        q.src = node_;
        q.dst = e2.requester;
        q.addr = e2.addr;
        q.tag = e2.tag;
        q.payload_bytes = static_cast<std::uint32_t>(e2.bytes);
        q.flits = wire_flits(e2.bytes);
        q.values = e2.sum;
        const std::uint32_t dst = e2.requester;
        pending_.erase(it);
        enqueue(r, dst, 1);
        return;
      }
      case proto::PKT_MM_ST: {
        for (std::uint32_t g = 0; g < p.aux; ++g) {
          const PacketHandle r = sim_.new_packet(*this);
          Packet& q = sim_.packets()[r];
          const std::uint64_t id = q.id;
          q = p;
          q.id = id;
          q.dst = g;
          enqueue(r, g, 0);
        }
        sim_.packets().release(h);
        return;
      }
      default: enqueue(h, p.dst, p.vc == 0 ? 0 : 1);
    }
  }
  bool done() const override { return pending_.empty(); }

 private:
  struct Pending {
    std::uint32_t requester = 0, left = 0;
    std::uint64_t tag = 0, addr = 0, bytes = 0;
    std::vector<double> sum;
  };
  void enqueue(PacketHandle h, std::uint32_t port, std::uint32_t vc) {
    q_[port][vc].push_back(h);
    pump(port);
  }
  void pump(std::uint32_t port) {
    OutputChannel& ch = out_[port];
    if (!ch.idle_at(sim_.now())) return;
    for (std::uint32_t vc : {1u, 0u}) {
      auto& q = q_[port][vc];
      if (q.empty() || !ch.has_credits(vc, sim_.packets()[q.front()].flits)) continue;
      const PacketHandle h = q.front();
      q.pop_front();
      schedule(ch.transmit(sim_, *this, h, vc), 2, 0, port);
      return;
    }
  }
  std::uint32_t node_;
  std::vector<OutputChannel> out_;
  std::vector<InputBuffer> in_;
  std::vector<std::array<std::deque<PacketHandle>, 2>> q_;
  std::map<std::uint64_t, Pending> pending_;
  std::uint64_t next_id_ = 0;
};

const bool registered = [] {
  NodeFactory f;
  f.engine = "net";
  f.build = [](Sim& sim, std::uint32_t node) { return std::make_unique<StandInSwitch>(sim, node); };
  NodeRegistry::instance().add(proto::NODE_SWITCH, "collective_test_standin", std::move(f));
  return true;
}();

// ------------------------------------------------------------------ harness for one run
struct Case {
  std::string op = "all_reduce", algo = "ring";
  std::uint32_t gpus = 4;
  std::uint64_t bytes = 1 << 16;
  std::uint32_t channels = 2;
  std::uint64_t chunk = 8192;
  std::uint64_t multiple = 1;
  bool functional = true;
  std::string switch_model = "collective_test_standin";
  // Enough credits for the bandwidth-delay product of a 125 GB/s link with 250 ns latency each
  // way (~65 KB = 4000 flits): with less, credits, not links, limit the bandwidth.
  std::uint32_t vc_depth = 8192;
  double cta_bw = 0.0;
  bool member_acks = false;
  std::uint32_t writes_per_response = 1;
  std::array<double, 4> prim_gbps{};  // copy, copy_send, reduce, reduce_send; 0: cta_bw
  double kernel_overhead_ns = 0.0;
};

proto::ParamValue pv_int(std::int64_t v) {
  proto::ParamValue p;
  p.set_i(v);
  return p;
}
proto::ParamValue pv_str(const std::string& v) {
  proto::ParamValue p;
  p.set_s(v);
  return p;
}
proto::ParamValue pv_bool(bool v) {
  proto::ParamValue p;
  p.set_b(v);
  return p;
}
proto::ParamValue pv_dbl(double v) {
  proto::ParamValue p;
  p.set_d(v);
  return p;
}

proto::Configure make_config(const Case& k) {
  proto::Configure cfg;
  auto* topo = cfg.mutable_topology();
  const std::uint32_t planes = 4;
  const std::uint32_t lanes[4] = {5, 4, 4, 5};
  for (std::uint32_t g = 0; g < k.gpus; ++g) {
    auto* n = topo->add_nodes();
    n->set_id(g);
    n->set_kind(proto::NODE_GPU);
    n->set_name("gpu" + std::to_string(g));
    n->set_num_ports(planes);
  }
  for (std::uint32_t s = 0; s < planes; ++s) {
    auto* n = topo->add_nodes();
    n->set_id(k.gpus + s);
    n->set_kind(proto::NODE_SWITCH);
    n->set_name("sw" + std::to_string(s));
    n->set_num_ports(k.gpus);
  }
  for (std::uint32_t g = 0; g < k.gpus; ++g)
    for (std::uint32_t s = 0; s < planes; ++s)
      for (int dir = 0; dir < 2; ++dir) {
        auto* l = topo->add_links();
        l->set_src_node(dir ? k.gpus + s : g);
        l->set_src_port(dir ? g : s);
        l->set_dst_node(dir ? g : k.gpus + s);
        l->set_dst_port(dir ? s : g);
        l->set_bw_gbps(25.0 * lanes[s]);
        l->set_latency_ps(250000);
        l->set_lanes(lanes[s]);
      }
  for (std::uint32_t i = 0; i < k.gpus + planes; ++i) {
    cfg.add_hosted_nodes(i);
    cfg.add_node_engine(0);
  }
  auto& m = *cfg.mutable_params();
  m["host.gpu_model"] = pv_str("collective");
  m["host.switch_model"] = pv_str(k.switch_model);
  m["net.flit_bytes"] = pv_int(16);
  m["net.header_flits"] = pv_int(1);
  m["net.vcs_per_port"] = pv_int(2);
  m["net.vc_depth_flits"] = pv_int(k.vc_depth);
  m["collective.op"] = pv_str(k.op);
  m["collective.algo"] = pv_str(k.algo);
  m["collective.bytes"] = pv_int(static_cast<std::int64_t>(k.bytes));
  m["collective.channels"] = pv_int(k.channels);
  m["collective.nvls_channels"] = pv_int(k.channels);
  m["collective.chunk_bytes"] = pv_int(static_cast<std::int64_t>(k.chunk));
  m["collective.slices_per_chunk"] = pv_int(2);
  m["collective.buffer_slices"] = pv_int(4);
  m["collective.nvls_chunk_bytes"] = pv_int(static_cast<std::int64_t>(k.chunk));
  m["collective.nvls_outstanding_bytes"] = pv_int(16384);
  m["collective.packet_bytes"] = pv_int(128);
  m["collective.packet_multiple"] = pv_int(static_cast<std::int64_t>(k.multiple));
  m["collective.functional"] = pv_bool(k.functional);
  m["collective.start_ns"] = pv_dbl(0.0);
  m["collective.cta_bw_gbps"] = pv_dbl(k.cta_bw);
  m["collective.writes_per_response"] = pv_int(k.writes_per_response);
  m["collective.kernel_overhead_ns"] = pv_dbl(k.kernel_overhead_ns);
  m["collective.cta_copy_gbps"] = pv_dbl(k.prim_gbps[0]);
  m["collective.cta_copy_send_gbps"] = pv_dbl(k.prim_gbps[1]);
  m["collective.cta_reduce_gbps"] = pv_dbl(k.prim_gbps[2]);
  m["collective.cta_reduce_send_gbps"] = pv_dbl(k.prim_gbps[3]);
  if (k.switch_model == "nvswitch") {  // every key the real router and its nvls feature read
    m["net.vcs_per_port"] = pv_int(8);
    m["net.routing_delay_ns"] = pv_dbl(1);
    m["net.vc_alloc_delay_ns"] = pv_dbl(1);
    m["net.sw_alloc_delay_ns"] = pv_dbl(1);
    m["net.xbar_delay_ns"] = pv_dbl(1);
    m["net.credit_delay_ns"] = pv_dbl(1);
    m["net.stats_bin_ns"] = pv_dbl(1000);
    m["net.sw_alloc_patience"] = pv_int(2);
    m["net.traffic_control"] = pv_bool(false);
    m["net.functional"] = pv_bool(k.functional);
    m["net.features"] = pv_str(k.algo == "nvls" ? "nvls" : "");
    m["net.nvls.multicast_delay_ns"] = pv_dbl(2);
    m["net.nvls.reduce_delay_ns"] = pv_dbl(4);
    m["net.nvls.member_acks"] = pv_bool(k.member_acks);
  }
  cfg.set_window_ps(250000);
  return cfg;
}

struct Outcome {
  std::map<std::string, double> stats;
  double finish_us = 0;
  double get(const std::string& n) const {
    auto it = stats.find(n);
    return it == stats.end() ? -1 : it->second;
  }
};

Outcome run_case(const Case& k) {
  HostedModel m;
  m.configure(make_config(k));
  m.sim().run_until(kNever);
  EXPECT_TRUE(m.done()) << m.blocked_reason();
  m.check_drained();
  proto::Stats st;
  m.export_stats(&st);
  Outcome o;
  for (const auto& s : st.stats()) o.stats[s.name()] = s.value();
  for (std::uint32_t g = 0; g < k.gpus; ++g)
    o.finish_us = std::max(o.finish_us, o.get("gpu" + std::to_string(g) + ".collective.finish_time") / 1e6);
  return o;
}

void expect_functional_ok(const Case& k, const Outcome& o, std::uint64_t elems_per_rank) {
  for (std::uint32_t g = 0; g < k.gpus; ++g) {
    const std::string pre = "gpu" + std::to_string(g) + ".collective.";
    EXPECT_EQ(o.get(pre + "functional_errors"), 0) << k.op << "/" << k.algo << " rank " << g;
    EXPECT_EQ(o.get(pre + "functional_checked"), static_cast<double>(elems_per_rank)) << k.op << " rank " << g;
  }
}

// A timing case (no values carried): ring all_reduce unless the test changes it.
Case timing_case(std::uint32_t gpus, std::uint64_t bytes, std::uint64_t chunk, std::uint32_t channels,
                 std::uint64_t multiple = 1) {
  Case k;
  k.gpus = gpus;
  k.bytes = bytes;
  k.functional = false;
  k.chunk = chunk;
  k.channels = channels;
  k.multiple = multiple;
  return k;
}

TEST(NcclCollectiveModel, RingAllReduceIsFunctionallyCorrect) {
  for (std::uint32_t n : {2u, 3u, 4u, 8u}) {
    Case k;
    k.gpus = n;
    k.bytes = 48 * 1024 + 64;  // not a multiple of the chunk: partial and empty slices occur
    auto o = run_case(k);
    expect_functional_ok(k, o, k.bytes / 4);
    for (std::uint32_t g = 0; g < n; ++g)
      EXPECT_EQ(o.get("gpu" + std::to_string(g) + ".collective.data_tx_bytes"),
                static_cast<double>(ring_bytes_sent_per_rank(build_ring_schedule(
                    RingParams{CollOp::kAllReduce, n, k.bytes, k.channels, k.chunk, 2, 16}, g))));
  }
}

TEST(NcclCollectiveModel, RingAllGatherAndReduceScatterAreFunctionallyCorrect) {
  for (const char* op : {"all_gather", "reduce_scatter"}) {
    Case k;
    k.op = op;
    k.gpus = 4;
    k.bytes = 4 * 20000;
    k.cta_bw = 20.0;  // paced CTA copies
    auto o = run_case(k);
    expect_functional_ok(k, o, std::string(op) == "all_gather" ? k.bytes / 4 : k.bytes / 4 / k.gpus);
  }
}

TEST(NcclCollectiveModel, NvlsAllReduceIsFunctionallyCorrect) {
  Case k;
  k.algo = "nvls";
  k.gpus = 8;
  k.bytes = 96 * 1024;
  k.multiple = 2;
  auto o = run_case(k);
  expect_functional_ok(k, o, k.bytes / 4);
}

TEST(NcclCollectiveModel, RingAllReduceLinkBytesEqualTheAnalyticalCount) {
  // Every GPU's transmit ports together carry 2(n-1)/n x size of data plus flags (8 B each) and
  // write responses (no payload).
  Case k;
  k.gpus = 4;
  k.bytes = 1 << 20;
  k.functional = false;
  k.chunk = 65536;
  auto o = run_case(k);
  for (std::uint32_t g = 0; g < k.gpus; ++g) {
    double payload = 0;
    for (int port = 0; port < 4; ++port)
      payload += o.get("gpu" + std::to_string(g) + ".port" + std::to_string(port) + ".tx.payload_bytes");
    const double flags = o.get("gpu" + std::to_string(g) + ".collective.flags_tx");
    EXPECT_EQ(payload - 8 * flags, 2.0 * (k.gpus - 1) / k.gpus * k.bytes);
  }
}

TEST(NcclCollectiveModel, BulkPacketsConvergeToSinglePackets) {
  Case k = timing_case(4, 8 << 20, 1 << 20, 8);
  std::vector<double> t;
  for (std::uint64_t m : {16u, 8u, 4u, 2u, 1u}) {
    k.multiple = m;
    t.push_back(run_case(k).finish_us);
  }
  const double ref = t.back();
  for (double v : t) std::cout << "  ring all_reduce 8 MB x4: " << v << " us, busbw " << 1.5 * k.bytes / (v * 1e3) << " GB/s\n";
  for (std::size_t i = 0; i + 1 < t.size(); ++i) {
    EXPECT_NEAR(t[i] / ref, 1.0, i == 0 ? 0.05 : 0.03) << "multiple index " << i;  // N=16: 5%, N<=8: 3%
    if (i + 2 < t.size()) {
      EXPECT_LE(std::abs(t[i + 1] - ref), std::abs(t[i] - ref) + 0.002 * ref);
    }
  }
}

TEST(NcclCollectiveModel, RingAllReduceBusBandwidthIsBoundedByLinkEfficiency) {
  // 128 B packets + 1 header flit, plus one header flit of write response per packet in the
  // opposite direction: at most 128/160 of 450 GB/s = 360 GB/s bus bandwidth.
  Case k = timing_case(4, 32 << 20, 1 << 20, 16, 8);
  auto o = run_case(k);
  const double busbw = 2.0 * (k.gpus - 1) / k.gpus * k.bytes / (o.finish_us * 1e3);
  EXPECT_LT(busbw, 360.0);
  EXPECT_GT(busbw, 300.0);
}

TEST(NcclCollectiveModel, ChannelTimeIsAccountedFor) {
  // Per GPU, channels x run time = CTA copying + waiting for data + waiting for a slot + fences
  // (+ idle after a channel's last slice). With a CTA rate the copying time is known exactly:
  // every slice byte once at cta_bw.
  Case k = timing_case(4, 4 << 20, 256 << 10, 4);
  k.cta_bw = 20.0;
  auto o = run_case(k);
  const RingParams rp{CollOp::kAllReduce, k.gpus, k.bytes, k.channels, k.chunk, 2, 16};
  for (std::uint32_t g = 0; g < k.gpus; ++g) {
    const std::string pre = "gpu" + std::to_string(g) + ".collective.";
    double slice_bytes = 0;
    for (const auto& ch : build_ring_schedule(rp, g).channels)
      for (const auto& op : ch) slice_bytes += static_cast<double>(op.bytes);
    const double copy_ps = slice_bytes / k.cta_bw * 1e3;  // bytes / (GB/s) = ns
    const double waits = o.get(pre + "wait_data_ps") + o.get(pre + "wait_slot_ps") + o.get(pre + "fence_ps");
    const double budget = k.channels * o.get(pre + "finish_time");
    EXPECT_GT(o.get(pre + "fence_ps"), 0) << g;
    EXPECT_LE(copy_ps + waits, budget * (1 + 1e-9)) << g;
    EXPECT_GT(copy_ps + waits, 0.9 * budget) << g;  // little time unaccounted for (channel ends)
    // Every write (128 B of data, or a flag) is answered once, two 250 ns links after at the earliest.
    EXPECT_EQ(o.get(pre + "write_ack_latency.count"), o.get(pre + "data_tx_bytes") / 128 + o.get(pre + "flags_tx")) << g;
    EXPECT_GE(o.get(pre + "write_ack_latency.min"), 500.0) << g;
    EXPECT_GE(o.get(pre + "write_ack_latency.max"), o.get(pre + "write_ack_latency.min")) << g;
  }
}

TEST(NcclCollectiveModel, NvlsTwoShotBeatsRingOnAnIdealSwitch) {
  // On an output-queued switch that replicates multicasts at the outputs, NVLS all_reduce moves
  // (1 + 1/n) x size per GPU and direction against the ring's 2(n-1)/n x size: its bus
  // bandwidth must exceed the ring's (public 8 x H100: ~480 vs ~370 GB/s).
  Case k;
  k.gpus = 8;
  k.bytes = 16 << 20;
  k.functional = false;
  k.channels = 16;
  k.multiple = 16;
  k.chunk = 1 << 20;
  k.algo = "nvls";
  k.cta_bw = 0;
  const double nvls = 1.75 * k.bytes / (run_case(k).finish_us * 1e3);
  k.algo = "ring";
  const double ring = 1.75 * k.bytes / (run_case(k).finish_us * 1e3);
  std::cout << "  8 GPUs, 16 MiB all_reduce busbw on the stand-in switch: nvls " << nvls << ", ring " << ring << " GB/s\n";
  EXPECT_GT(nvls, 1.2 * ring);
}

// The same schedules through the real NVSwitch router (external/net/src/nvswitch.cc) and its
// nvls feature: every rank ends with the right values.
TEST(CollectiveOnNvSwitch, RingAndNvlsAreFunctionallyCorrect) {
  for (const char* op : {"all_reduce", "all_gather", "reduce_scatter"}) {
    Case k;
    k.switch_model = "nvswitch";
    k.op = op;
    k.gpus = 4;
    k.bytes = 4 * 24000;
    k.cta_bw = 30.0;
    auto o = run_case(k);
    expect_functional_ok(k, o, std::string(op) == "reduce_scatter" ? k.bytes / 4 / k.gpus : k.bytes / 4);
  }
  for (bool acks : {false, true}) {
    Case k;
    k.switch_model = "nvswitch";
    k.algo = "nvls";
    k.member_acks = acks;
    k.gpus = 8;
    k.bytes = 64 * 1024;
    auto o = run_case(k);
    expect_functional_ok(k, o, k.bytes / 4);
  }
}

// A functional 4-GPU all_reduce with CTAs paced at 20 GB/s (slower than the links).
Case paced_case() {
  Case k;
  k.gpus = 4;
  k.bytes = 1 << 20;
  k.chunk = 64 << 10;
  k.channels = 4;
  k.cta_bw = 20.0;
  return k;
}

TEST(NcclCollectiveModel, FewerWriteResponsesRaiseTheRingCeiling) {
  // One response flit per two 128 B writes: the reverse direction carries 8 instead of 16 B of
  // responses per write, so a link-bound ring all_reduce gets faster (ceiling 128/152 instead
  // of 128/160 of the link) and stays exact.
  Case k;
  k.gpus = 4;
  k.bytes = 4 << 20;
  k.chunk = 256 << 10;
  k.channels = 8;
  k.multiple = 4;
  const double one = run_case(k).finish_us;
  k.writes_per_response = 2;
  auto o = run_case(k);
  expect_functional_ok(k, o, k.bytes / 4);
  EXPECT_LT(o.finish_us, one * 0.99);
  EXPECT_GT(o.finish_us, one * 152.0 / 160.0 * 0.97);
}

TEST(NcclCollectiveModel, PrimitiveRatesDefaultToTheCtaRate) {
  // A primitive's CTA rate is cta_<shape>_gbps where set, else cta_bw_gbps: the same rate set
  // explicitly changes nothing, and a slower copySend (all_gather's only sending primitive)
  // slows all_gather but leaves reduce_scatter (send, recvReduceCopy) alone.
  Case k = paced_case();
  k.op = "all_gather";
  const double ag = run_case(k).finish_us;
  k.prim_gbps = {k.cta_bw, k.cta_bw, k.cta_bw, k.cta_bw};
  EXPECT_EQ(run_case(k).finish_us, ag);
  k.prim_gbps = {0, k.cta_bw / 2, 0, 0};
  const auto slow = run_case(k);
  expect_functional_ok(k, slow, k.bytes / 4);
  EXPECT_GT(slow.finish_us, ag * 1.2);
  k.op = "reduce_scatter";
  const double rs_slow = run_case(k).finish_us;
  k.prim_gbps = {};
  EXPECT_EQ(run_case(k).finish_us, rs_slow);
}

TEST(NcclCollectiveModel, KernelOverheadDelaysARingByExactlyThatMuch) {
  // The overhead only shifts a ring's start: every packet moves later by the same amount.
  Case k = paced_case();
  const double base = run_case(k).finish_us;
  k.kernel_overhead_ns = 19000.0;
  const auto o = run_case(k);
  expect_functional_ok(k, o, k.bytes / 4);
  EXPECT_NEAR(o.finish_us - base, 19.0, 1e-6);
  k.algo = "nvls";  // NVLS is not NCCL's ring kernel: unaffected
  k.kernel_overhead_ns = 0.0;
  const double nvls = run_case(k).finish_us;
  k.kernel_overhead_ns = 19000.0;
  EXPECT_EQ(run_case(k).finish_us, nvls);
}

TEST(NcclCollectiveModel, RejectsBadConfig) {
  Case k;
  k.op = "all_to_all";
  EXPECT_THROW(run_case(k), ConfigError);
  k.op = "all_reduce";
  k.vc_depth = 256;
  k.multiple = 100;  // 900 flits > 256 flit VC
  EXPECT_THROW(run_case(k), ConfigError);
  k.vc_depth = 8192;
  k.multiple = 1;
  k.writes_per_response = 0;
  EXPECT_THROW(run_case(k), ConfigError);
  k.writes_per_response = 1;
  k.prim_gbps[1] = -1.0;
  EXPECT_THROW(run_case(k), ConfigError);
  k.prim_gbps[1] = 0.0;
  k.kernel_overhead_ns = -1.0;
  EXPECT_THROW(run_case(k), ConfigError);
}

}  // namespace
}  // namespace cais::net
