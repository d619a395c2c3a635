// NVLS through the real router: the switch replicates a multicast at its outputs, so the copies
// of one multimem.st (and the reads of one multimem.ld_reduce) leave their output ports
// concurrently, each waiting only for its own output and credits, with exact functional values.
//
// The GPUs are "nvls_probe" nodes defined here: they send a scripted list of packets at time 0,
// answer the switch's READ_REQs with known values (and NVLS copies with MM_ACK when asked), and
// record everything they receive with its arrival time.
#include <gtest/gtest.h>

#include <array>
#include <deque>
#include <map>
#include <memory>
#include <tuple>
#include <vector>

#include "cais/engine_host.h"
#include "cais/errors.h"
#include "cais/link.h"
#include "cais/net/nvswitch.h"
#include "cais/net/vc_allocator.h"
#include "cais/params.h"
#include "router_test_util.h"

namespace cais::net {
namespace {

constexpr TimePs kNs = 1000;
constexpr std::uint32_t kReqVc = 0, kRespVc = 1;

// What the probe GPUs of one test do and see.
struct ProbeScript {
  struct Send {
    std::uint32_t gpu = 0;
    Packet p;  // type, dst, addr, tag, aux, count, payload_bytes, values are sent as given
    TimePs at = 0;  // when the GPU queues it (responses go on the response VC)
  };
  struct Got {
    TimePs t = 0;
    std::uint32_t gpu = 0;
    Packet p;
  };
  std::vector<Send> sends;
  std::map<std::uint32_t, TimePs> hold_until;  // GPU -> its input buffers drain only from then on
  bool ack_copies = false;                     // answer MM_ST/MM_RED copies with MM_ACK
  std::vector<Got> got;
};
ProbeScript* g_script = nullptr;

// The value GPU `gpu` holds at element `i` of the line at `addr` (what it answers reads with).
double held_value(std::uint32_t gpu, std::uint64_t addr, std::size_t i) {
  return 0.5 * (gpu + 1) + static_cast<double>((addr >> 7) % 5) * 10 + static_cast<double>(i) * 100;
}

class NvlsProbe : public NodeComponent {
 public:
  NvlsProbe(Sim& sim, std::uint32_t node) : NodeComponent(sim, sim.node(node).name, node << 8), node_(node) {
    const Params& p = sim.params();
    flit_bytes_ = static_cast<std::uint32_t>(p.get_uint("net.flit_bytes"));
    header_flits_ = static_cast<std::uint32_t>(p.get_uint("net.header_flits"));
    init_endpoint_ports(sim, node, name(), VcLayout::of(sim), flit_bytes_, out_, in_);
    queues_.resize(out_.size());
    schedule(0, kStart);
  }

  void handle(const Event& e) override {
    switch (e.kind) {
      case kPacketArrival: return on_arrival(static_cast<PacketHandle>(e.arg));
      case kStart: return start();
      case kPortFree: return pump(e.arg32);
      case kDrain: return drain(e.arg32);
      case kSendAt: return send_scripted(g_script->sends[e.arg].p);
      default: throw InvariantError("nvls probe: unknown event");
    }
  }
  bool done() const override { return queued_ == 0; }
  void check_drained() const override {
    for (const auto& o : out_)
      if (o.connected() && !o.all_credits_home()) throw InvariantError(name() + ": credits not returned");
    for (const auto& i : in_)
      if (i.total_packets() != 0) throw InvariantError(name() + ": packets left in its input buffers");
  }

 private:
  enum Kind : std::uint32_t { kStart = 1, kPortFree, kDrain, kSendAt };

  void start() {
    for (std::size_t i = 0; i < g_script->sends.size(); ++i) {
      const auto& s = g_script->sends[i];
      if (s.gpu != node_) continue;
      if (s.at > 0) {
        schedule(s.at, kSendAt, i);
      } else {
        send_scripted(s.p);
      }
    }
  }
  void send_scripted(const Packet& p) { send(p, vc_class_of(p.type, false) == VcClass::kResponse ? kRespVc : kReqVc); }
  void send(const Packet& what, std::uint32_t vc) {
    const PacketHandle h = sim_.new_packet(*this);
    Packet& p = sim_.packets()[h];
    p.type = what.type;
    p.src = node_;
    p.dst = what.dst;
    p.addr = what.addr;
    p.tag = what.tag;
    p.aux = what.aux;
    p.count = what.count;
    p.payload_bytes = what.payload_bytes;
    p.values = what.values;
    p.flits = flits_for(p.payload_bytes, flit_bytes_, header_flits_);
    p.inject_ps = sim_.now();
    queues_[0][vc].push_back(h);
    ++queued_;
    pump(0);
  }
  void pump(std::uint32_t port) {
    OutputChannel& ch = out_[port];
    if (!ch.idle_at(sim_.now())) return;
    for (std::uint32_t vc : {kRespVc, kReqVc}) {
      auto& q = queues_[port][vc];
      if (q.empty() || !ch.has_credits(vc, sim_.packets()[q.front()].flits)) continue;
      const PacketHandle h = q.front();
      q.pop_front();
      --queued_;
      schedule(ch.transmit(sim_, *this, h, vc), kPortFree, 0, port);
      return;
    }
  }
  void on_arrival(PacketHandle h) {
    const Packet& p = sim_.packets()[h];
    const std::uint32_t port = p.hop_port;
    if (p.type == proto::PKT_CREDIT) {
      out_[port].return_credits(p.vc, p.count);
      sim_.packets().release(h);
      return pump(port);
    }
    in_[port].accept(sim_, h);
    auto it = g_script->hold_until.find(node_);
    if (it != g_script->hold_until.end() && sim_.now() < it->second) {
      schedule(it->second, kDrain, 0, port);  // holding: the switch's credits stay out
      return;
    }
    drain(port);
  }
  void drain(std::uint32_t port) {
    for (std::uint32_t vc = 0; vc < in_[port].num_vcs(); ++vc)
      while (!in_[port].empty(vc)) consume(in_[port].pop(sim_, *this, vc));
  }
  void consume(PacketHandle h) {
    const Packet p = sim_.packets()[h];
    sim_.packets().release(h);
    g_script->got.push_back({sim_.now(), node_, p});
    if (p.type == proto::PKT_READ_REQ) return answer_read(p);
    if ((p.type == proto::PKT_MM_ST || p.type == proto::PKT_MM_RED) && g_script->ack_copies) {
      Packet ack;
      ack.type = proto::PKT_MM_ACK;
      ack.dst = p.src;
      ack.addr = p.addr;
      ack.tag = p.tag;
      send(ack, kRespVc);
    }
  }
  void answer_read(const Packet& req) {
    Packet r;
    r.type = proto::PKT_READ_RESP;
    r.dst = req.src;
    r.addr = req.addr;
    r.tag = req.tag;
    r.payload_bytes = req.count;
    for (std::size_t i = 0; i < req.count / 4; ++i) r.values.push_back(held_value(node_, req.addr, i));
    send(r, kRespVc);
  }

  std::uint32_t node_;
  std::uint32_t flit_bytes_ = 16, header_flits_ = 1;
  std::uint64_t queued_ = 0;
  std::vector<OutputChannel> out_;
  std::vector<InputBuffer> in_;
  std::vector<std::array<std::deque<PacketHandle>, 2>> queues_;
};

const bool registered = [] {
  NodeFactory f;
  f.engine = "gpu";
  f.build = [](Sim& sim, std::uint32_t node) { return std::make_unique<NvlsProbe>(sim, node); };
  NodeRegistry::instance().add(proto::NODE_GPU, "nvls_probe", std::move(f));
  return true;
}();

// ------------------------------------------------------------------ rig
// 8 probe GPUs on one NVSwitch with the nvls feature; 16 GB/s links (one 16 B flit per ns),
// 1 ns latency, 1 ns per pipeline stage (routing, VC and switch allocation, crossbar).
constexpr std::uint32_t kGpus = 8;
constexpr TimePs kLinkNs = 1, kPipelineNs = 3, kXbarNs = 1, kMulticastNs = 2, kReduceNs = 4;

struct NvlsRun {
  ProbeScript script;
  std::map<std::string, double> stats;
  double stat(const std::string& n) const {
    auto it = stats.find(n);
    return it == stats.end() ? -1 : it->second;
  }
  std::vector<ProbeScript::Got> of_type(proto::PacketType t) const {
    std::vector<ProbeScript::Got> out;
    for (const auto& g : script.got)
      if (g.p.type == t) out.push_back(g);
    return out;
  }
};

void run(NvlsRun& r, std::uint32_t vc_depth_flits, bool member_acks = false, long output_queue_flits = 0,
         const std::string& granularity = "packet", long vcs = 2) {
  auto b = testing::xbar(kGpus);
  b.net_params(vcs, vc_depth_flits);
  b.set_s("host.gpu_model", "nvls_probe");
  b.set_b("net.functional", true);
  b.set_s("net.features", "nvls");
  b.set_d("net.nvls.multicast_delay_ns", kMulticastNs);
  b.set_d("net.nvls.reduce_delay_ns", kReduceNs);
  b.set_b("net.nvls.member_acks", member_acks);
  if (output_queue_flits) b.set("net.output_queue_flits", output_queue_flits);
  b.set_s("net.sw_alloc_granularity", granularity);
  r.script.ack_copies = member_acks;
  g_script = &r.script;
  HostedModel m;
  m.configure(b.done());
  m.sim().run_until(kNever);
  EXPECT_TRUE(m.done()) << m.blocked_reason();
  m.check_drained();  // every VC buffer empty, every credit home, no NVLS operation left open
  proto::Stats st;
  m.export_stats(&st);
  for (const auto& s : st.stats()) r.stats[s.name()] = s.value();
  g_script = nullptr;
}

Packet multimem(proto::PacketType type, std::uint64_t addr, std::uint64_t tag, std::uint32_t payload,
                std::vector<double> values = {}) {
  Packet p;
  p.type = type;
  p.addr = addr;
  p.tag = tag;
  p.aux = kGpus;  // the whole group
  p.payload_bytes = payload;
  p.values = std::move(values);
  return p;
}

TimePs serialisation(std::uint32_t payload) { return flits_for(payload, 16, 1) * kNs; }

// Every GPU multicasts `stores` stores of `bytes` to the whole group, with VC buffers of two packets.
void run_all_multicast(NvlsRun& r, std::uint64_t stores, std::uint32_t bytes = 1024,
                       const std::string& granularity = "packet", long vcs = 2) {
  for (std::uint32_t g = 0; g < kGpus; ++g)
    for (std::uint64_t k = 0; k < stores; ++k)
      r.script.sends.push_back({g, multimem(proto::PKT_MM_ST, (std::uint64_t{g} << 32) + 128 * k, k, bytes, {double(g)})});
  run(r, 2 * flits_for(bytes, 16, 1), false, 0, granularity, vcs);
}

// ------------------------------------------------------------------ tests
TEST(NvlsReplication, MulticastCopiesLeaveTheOutputsTogether) {
  // One 1 KiB multimem.st from GPU 2 to all 8: every copy arrives one switch traversal after the
  // request, i.e. one serialisation per hop plus latency, not 8 serialisations one after another.
  NvlsRun r;
  r.script.sends.push_back({2, multimem(proto::PKT_MM_ST, 0x4000, 7, 1024, {1.5, -2.25})});
  run(r, 1024);
  const auto copies = r.of_type(proto::PKT_MM_ST);
  ASSERT_EQ(copies.size(), kGpus);
  const TimePs ser = serialisation(1024);
  const TimePs expect = 2 * ser + (2 * kLinkNs + kMulticastNs + kPipelineNs + kXbarNs) * kNs;
  std::map<std::uint32_t, int> per_gpu;
  for (const auto& c : copies) {
    EXPECT_EQ(c.t, expect) << "copy to gpu " << c.gpu;
    EXPECT_EQ(c.gpu, c.p.dst);
    EXPECT_EQ(c.p.src, 2u);
    EXPECT_EQ(c.p.values, (std::vector<double>{1.5, -2.25}));
    ++per_gpu[c.gpu];
  }
  EXPECT_EQ(per_gpu.size(), kGpus);  // one copy each
  const auto acks = r.of_type(proto::PKT_MM_ACK);
  ASSERT_EQ(acks.size(), 1u);
  EXPECT_EQ(acks[0].gpu, 2u);
  EXPECT_EQ(r.stat("sw0.packets_injected_at_outputs"), kGpus + 1.0);  // copies and the ack
  for (std::uint32_t g = 0; g < kGpus; ++g)
    EXPECT_EQ(r.stat("sw0.port" + std::to_string(g) + ".tx.bytes.PKT_MM_ST"), 1024.0) << g;
}

TEST(NvlsReplication, LdReduceReadsGoOutTogetherAndTheSumIsExact) {
  for (bool member_acks : {false, true}) {
    // GPU 3 ld_reduces a 256 B line and multicasts-reduces another; GPU 6 stores to a third.
    NvlsRun r;
    Packet ld = multimem(proto::PKT_MM_LD_REDUCE_REQ, 0x8080, 9, 0);
    ld.count = 256;
    r.script.sends.push_back({3, ld});
    r.script.sends.push_back({3, multimem(proto::PKT_MM_RED, 0x9000, 10, 64, {0.1, 0.2, 0.3})});
    r.script.sends.push_back({6, multimem(proto::PKT_MM_ST, 0xA000, 11, 128, {4.0})});
    run(r, 1024, member_acks);
    const auto reads = r.of_type(proto::PKT_READ_REQ);
    ASSERT_EQ(reads.size(), kGpus);
    for (const auto& x : reads) EXPECT_EQ(x.t, reads[0].t) << "read of gpu " << x.gpu;
    const auto resp = r.of_type(proto::PKT_MM_LD_REDUCE_RESP);
    ASSERT_EQ(resp.size(), 1u);
    EXPECT_EQ(resp[0].gpu, 3u);
    EXPECT_EQ(resp[0].p.count, kGpus);
    std::vector<double> sum(64, 0.0);
    for (std::uint32_t g = 0; g < kGpus; ++g)
      for (std::size_t i = 0; i < sum.size(); ++i) sum[i] += held_value(g, 0x8080, i);
    EXPECT_EQ(resp[0].p.values, sum);  // the same additions in the same order: exact
    // Every copy of every multicast delivered exactly once, with its values.
    std::map<std::tuple<std::uint32_t, std::uint32_t, std::uint64_t>, int> seen;
    for (auto t : {proto::PKT_MM_RED, proto::PKT_MM_ST})
      for (const auto& c : r.of_type(t)) {
        ++seen[std::make_tuple(c.gpu, c.p.src, c.p.tag)];
        EXPECT_EQ(c.p.values, t == proto::PKT_MM_RED ? (std::vector<double>{0.1, 0.2, 0.3}) : std::vector<double>{4.0});
      }
    EXPECT_EQ(seen.size(), 2 * kGpus);
    for (const auto& s : seen) EXPECT_EQ(s.second, 1);
    // The issuers get one ack per multicast, whoever acknowledges.
    std::map<std::uint32_t, int> acks;
    for (const auto& a : r.of_type(proto::PKT_MM_ACK)) {
      ++acks[a.gpu];
      EXPECT_EQ(a.p.count, kGpus);
    }
    EXPECT_EQ(acks, (std::map<std::uint32_t, int>{{3, 1}, {6, 1}})) << "member_acks " << member_acks;
  }
}

TEST(NvlsReplication, ACopyWaitsOnlyForItsOwnOutput) {
  // GPU 5 keeps its input buffer (2 packets of room) until 20 us, so the switch's output to it
  // runs out of credits after two copies. The copies to every other GPU must not wait behind it.
  const TimePs hold = 20000 * kNs;
  NvlsRun r;
  r.script.hold_until[5] = hold;
  for (std::uint64_t k = 0; k < 4; ++k)
    r.script.sends.push_back({2, multimem(proto::PKT_MM_ST, 0x4000 + 128 * k, k, 1024, {double(k)})});
  run(r, 2 * flits_for(1024, 16, 1));
  const auto copies = r.of_type(proto::PKT_MM_ST);
  ASSERT_EQ(copies.size(), 4 * kGpus);
  std::map<std::pair<std::uint32_t, std::uint64_t>, int> seen;
  for (const auto& c : copies) {
    ++seen[std::make_pair(c.gpu, c.p.tag)];
    const std::vector<double> stored(1, static_cast<double>(c.p.tag));
    EXPECT_EQ(c.p.values, stored);
    if (c.gpu == 5 && c.p.tag >= 2) {
      EXPECT_GE(c.t, hold);  // no credits before GPU 5 drains
    } else if (c.gpu != 5) {
      EXPECT_LT(c.t, 6 * serialisation(1024)) << "copy " << c.p.tag << " to gpu " << c.gpu;
    }
  }
  EXPECT_EQ(seen.size(), 4 * kGpus);
}

TEST(NvlsReplication, EveryGpuMulticastingKeepsEveryOutputBusy) {
  // All 8 GPUs multicast 32 stores of 1 KiB each to the group: every output carries 256 copies.
  // Replicated at the outputs, the outputs stream them back to back, with VC buffers of only
  // two packets (credits never overflow: the input units and output channels would throw).
  constexpr std::uint64_t kStores = 32;
  NvlsRun r;
  run_all_multicast(r, kStores);
  const auto copies = r.of_type(proto::PKT_MM_ST);
  ASSERT_EQ(copies.size(), kGpus * kGpus * kStores);
  TimePs last = 0;
  std::map<std::tuple<std::uint32_t, std::uint32_t, std::uint64_t>, int> seen;
  for (const auto& c : copies) {
    last = std::max(last, c.t);
    ++seen[std::make_tuple(c.gpu, c.p.src, c.p.tag)];
  }
  EXPECT_EQ(seen.size(), copies.size());  // each exactly once
  const TimePs output_bound = kGpus * kStores * serialisation(1024);
  std::cout << "  all-to-all multicast: last copy at " << last / kNs << " ns, output bound " << output_bound / kNs
            << " ns\n";
  EXPECT_LT(last, output_bound + output_bound / 20);
  for (std::uint32_t g = 0; g < kGpus; ++g)
    EXPECT_EQ(r.stat("sw0.port" + std::to_string(g) + ".tx.bytes.PKT_MM_ST"), 1024.0 * kGpus * kStores) << g;
}

TEST(NvlsReplication, FlitAllocatedReplicationQueuesFeedTheirOutputsAtLineRate) {
  // The same all-to-all multicast in 128 B stores (9 flits) through the flit-level allocator. A
  // replication queue holds packets the switch routed when it made them, so its next copy does
  // not wait out the routing/VC/switch-allocation stages (3 ns) behind the last one's tail, as
  // the next packet of an input VC does: with that bubble the outputs would be 33 % slower.
  // Eight VCs, so that a copy finds a free output VC while the last one's is released.
  constexpr std::uint64_t kStores = 64;
  NvlsRun r;
  run_all_multicast(r, kStores, 128, "flit", 8);
  const auto copies = r.of_type(proto::PKT_MM_ST);
  ASSERT_EQ(copies.size(), kGpus * kGpus * kStores);
  TimePs last = 0;
  for (const auto& c : copies) last = std::max(last, c.t);
  const TimePs output_bound = kGpus * kStores * serialisation(128);
  EXPECT_LT(last, output_bound + output_bound / 10) << last / kNs << " ns against " << output_bound / kNs;
  for (std::uint32_t g = 0; g < kGpus; ++g)
    EXPECT_EQ(r.stat("sw0.port" + std::to_string(g) + ".tx.bytes.PKT_MM_ST"), 128.0 * kGpus * kStores) << g;
}

TEST(NvlsReplication, ResponsesDoNotQueueBehindMulticastCopies) {
  // All 8 GPUs multicast 32 stores of 1 KiB: every output receives 8 copies per store time and
  // sends one, so its replication queue builds a backlog of ~200 copies (~13 us). The switch's
  // acks (responses) enter the same outputs' replication queues; kept in their own class queue
  // they pass the backlog, so every issuer has all 32 acks soon after its last store.
  constexpr std::uint64_t kStores = 32;
  NvlsRun r;
  run_all_multicast(r, kStores);
  const TimePs last_store_sent = kStores * serialisation(1024);
  std::map<std::uint32_t, int> acks;
  for (const auto& a : r.of_type(proto::PKT_MM_ACK)) {
    ++acks[a.gpu];
    EXPECT_LT(a.t, last_store_sent + 8 * serialisation(1024)) << "ack " << a.p.tag << " to gpu " << a.gpu;
  }
  for (std::uint32_t g = 0; g < kGpus; ++g) EXPECT_EQ(acks[g], static_cast<int>(kStores)) << g;
  TimePs last_copy = 0;
  for (const auto& c : r.of_type(proto::PKT_MM_ST)) last_copy = std::max(last_copy, c.t);
  EXPECT_GT(last_copy, 4 * last_store_sent);  // the backlog was real
}

TEST(NvlsReplication, TwoShotAllReducePatternIsOutputBound) {
  // The traffic of NVLS two-shot all_reduce: every GPU ld_reduces its slices (the switch reads
  // all 8 members and answers the sum) and multicast-stores them. Each output carries 8 copies
  // and one reduced response per slice (plus read requests): the run must take about that long.
  constexpr std::uint64_t kSlices = 24;
  constexpr std::uint32_t kBytes = 1024;
  NvlsRun r;
  for (std::uint32_t g = 0; g < kGpus; ++g)
    for (std::uint64_t k = 0; k < kSlices; ++k) {
      const std::uint64_t addr = (std::uint64_t{g} << 32) + 128 * k;
      Packet ld = multimem(proto::PKT_MM_LD_REDUCE_REQ, addr, 2 * k, 0);
      ld.count = kBytes;
      r.script.sends.push_back({g, ld});
      r.script.sends.push_back({g, multimem(proto::PKT_MM_ST, addr, 2 * k + 1, kBytes, {double(g)})});
    }
  run(r, 4 * flits_for(kBytes, 16, 1));
  TimePs last = 0;
  for (const auto& x : r.script.got) last = std::max(last, x.t);
  const auto resp = r.of_type(proto::PKT_MM_LD_REDUCE_RESP);
  ASSERT_EQ(resp.size(), kGpus * kSlices);
  for (const auto& x : resp) {
    std::vector<double> sum(kBytes / 4, 0.0);
    for (std::uint32_t m = 0; m < kGpus; ++m)
      for (std::size_t i = 0; i < sum.size(); ++i) sum[i] += held_value(m, x.p.addr, i);
    EXPECT_EQ(x.p.values, sum);
  }
  EXPECT_EQ(r.of_type(proto::PKT_MM_ST).size(), kGpus * kGpus * kSlices);
  const TimePs per_output = kSlices * ((kGpus + 1) * serialisation(kBytes) + kGpus * serialisation(0));
  std::cout << "  two-shot pattern: last packet at " << last / kNs << " ns, output bound " << per_output / kNs
            << " ns\n";
  EXPECT_LT(last, per_output + per_output / 10);
}

// GPUs 2 and 3 stream 4 KiB writes to GPU 7, keeping output 7 busy from ~260 ns on (the switch
// sees a packet once its tail is in). At 300 ns GPU 0 sends a write response to GPU 7 (response
// VC) and then a 1 KiB write to idle GPU 5 (request VC). When each reached its GPU:
struct BusyOutputRun {
  TimePs write_at = 0;     // the 1 KiB write to the free output 5
  TimePs ack_at = 0;       // the response to the busy output 7
  TimePs last_big_at = 0;  // the last 4 KiB write to output 7
};
BusyOutputRun run_busy_output(long output_queue_flits) {
  NvlsRun r;
  Packet big;
  big.type = proto::PKT_WRITE;
  big.dst = 7;
  big.payload_bytes = 4096;
  for (std::uint32_t g : {2u, 3u})
    for (std::uint64_t k = 0; k < 4; ++k) {
      big.addr = (std::uint64_t{g} << 32) + 4096 * k;
      r.script.sends.push_back({g, big});
    }
  Packet ack;
  ack.type = proto::PKT_WRITE_ACK;
  ack.dst = 7;
  r.script.sends.push_back({0, ack, 300 * kNs});
  Packet w;
  w.type = proto::PKT_WRITE;
  w.dst = 5;
  w.payload_bytes = 1024;
  r.script.sends.push_back({0, w, 301 * kNs});
  run(r, 2 * flits_for(4096, 16, 1), false, output_queue_flits);
  BusyOutputRun out;
  const auto writes = r.of_type(proto::PKT_WRITE);
  EXPECT_EQ(writes.size(), 9u) << "queue " << output_queue_flits;
  for (const auto& x : writes) {
    TimePs& t = x.gpu == 5 ? out.write_at : out.last_big_at;
    t = std::max(t, x.t);
  }
  const auto acks = r.of_type(proto::PKT_WRITE_ACK);
  EXPECT_EQ(acks.size(), 1u) << "queue " << output_queue_flits;
  if (!acks.empty()) out.ack_at = acks[0].t;
  return out;
}

const TimePs kWriteTailIn = 301 * kNs + serialisation(1024) + kLinkNs * kNs;  // the write's tail at the switch

// Without an output queue input 0 requests output 7 for the response and the write waits behind
// it until output 7 grants (~520 ns). Once output 7 may queue a whole 4 KiB packet behind the
// one on its wire, the response crosses into that queue at once and input 0's write to the free
// output 5 follows it; a queue of one flit admits nothing while output 7 streams, so the write
// waits as without a queue. Output 7's link is shared, not lost: its last 4 KiB write arrives
// at most one response time later than without the queue.
TEST(SwitchAllocation, AnOutputQueueLetsAResponseCrossWithoutHoldingItsInput) {
  const long packet_queue = flits_for(4096, 16, 1) + 1;
  const BusyOutputRun none = run_busy_output(0), flit = run_busy_output(1), packet = run_busy_output(packet_queue);
  std::cout << "  write to the free output arrives at " << none.write_at / kNs << " / " << flit.write_at / kNs
            << " / " << packet.write_at / kNs << " ns (output queue 0 / 1 / " << packet_queue << " flits)\n";
  // One flit of queue: the response goes one flit time early, nothing passes a streaming output.
  EXPECT_LE(none.write_at - flit.write_at, serialisation(0));
  EXPECT_LE(none.ack_at - flit.ack_at, serialisation(0));
  EXPECT_GT(none.write_at, packet.write_at + serialisation(1024));  // without a queue: blocked
  EXPECT_LT(packet.write_at, kWriteTailIn + 10 * kNs);              // with one: no wait
  EXPECT_LE(packet.last_big_at, none.last_big_at + serialisation(0));
  EXPECT_GT(packet.ack_at, 300 * kNs);
}

}  // namespace
}  // namespace cais::net
