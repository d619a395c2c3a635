// Router unit tests: credit flow control, conservation, allocator fairness, routing.
#include <gtest/gtest.h>

#include <map>
#include <numeric>
#include <set>

#include "cais/engine_host.h"
#include "cais/errors.h"
#include "cais/net/booksim_config.h"
#include "cais/net/nvswitch.h"
#include "cais/net/switch_allocator.h"
#include "cais/net/synthetic_terminal.h"
#include "cais/net/vc_allocator.h"
#include "router_test_util.h"

namespace cais::net {
namespace {

using testing::TopoBuilder;

std::vector<SyntheticTerminal*> terminals(HostedModel& m) {
  std::vector<SyntheticTerminal*> out;
  for (const auto& n : m.nodes())
    if (auto* t = dynamic_cast<SyntheticTerminal*>(n.get())) out.push_back(t);
  return out;
}

std::vector<NvSwitch*> switches(HostedModel& m) {
  std::vector<NvSwitch*> out;
  for (const auto& n : m.nodes())
    if (auto* s = dynamic_cast<NvSwitch*>(n.get())) out.push_back(s);
  return out;
}

// Run synthetic traffic for `cycles`, stop the sources, drain, and check every invariant.
SyntheticCounters run_and_drain(HostedModel& m, TimePs until) {
  m.sim().run_until(until);
  for (auto* t : terminals(m)) t->stop_injection();
  m.sim().run_until(kNever);
  EXPECT_TRUE(m.done()) << m.blocked_reason();
  m.check_drained();
  SyntheticCounters sum;
  for (auto* t : terminals(m)) {
    sum.sent_flits += t->counters().sent_flits;
    sum.received_flits += t->counters().received_flits;
    sum.generated_packets += t->counters().generated_packets;
    sum.received_packets += t->counters().received_packets;
  }
  return sum;
}

TEST(Router, CreditsNeverOverflowUnderSaturation) {
  // Two packets of room per VC, two VCs, every terminal at full load toward one hotspot and
  // uniformly: InputUnit::accept and OutputChannel::return_credits throw on any overrun.
  for (const std::string traffic : {"uniform", "hotspot"}) {
    auto b = testing::xbar(8);
    b.net_params(2, 18);
    b.synthetic(traffic, 1.0 / 9, 9, 100, 2000);
    HostedModel m;
    m.configure(b.done());
    SyntheticCounters s;
    ASSERT_NO_THROW(s = run_and_drain(m, 20000 * 1000ull)) << traffic;
    EXPECT_GT(s.received_flits, 10000u);
    EXPECT_EQ(s.sent_flits, s.received_flits);
  }
}

TEST(Router, BytesInjectedEqualBytesDelivered) {
  auto b = testing::fat_tree(3, 4, 2);
  b.net_params();
  b.synthetic("uniform", 0.05, 9, 100, 1000);
  HostedModel m;
  m.configure(b.done(7));
  const auto s = run_and_drain(m, 20000 * 1000ull);
  EXPECT_GT(s.generated_packets, 1000u);
  EXPECT_EQ(s.generated_packets, s.received_packets);
  EXPECT_EQ(s.sent_flits, s.received_flits);
  // Every switch forwarded what it received: tx flits over all ports == rx from terminals+switches.
  std::uint64_t tx = 0;
  for (auto* sw : switches(m))
    for (std::uint32_t p = 0; p < sw->num_ports(); ++p) tx += sw->output(p).channel().stats().flits;
  EXPECT_GE(tx, s.received_flits);
}

TEST(Router, ZeroLoadLatencyIsPipelinePlusSerialisation) {
  // 9-flit packets, 1-cycle links, routing+VC+switch allocation+crossbar = 4 cycles:
  // 9 (source serialisation) + 1 (link) + 4 (pipeline, cut-through) + 1 (link) = 15 cycles.
  auto b = testing::xbar(4);
  b.net_params();
  b.synthetic("uniform", 0.0005, 9, 0, 200000);
  HostedModel m;
  m.configure(b.done());
  run_and_drain(m, 200000 * 1000ull);
  double sum = 0, n = 0;
  for (auto* t : terminals(m)) {
    sum += t->counters().latency_sum_cycles;
    n += static_cast<double>(t->counters().measured_received);
  }
  ASSERT_GT(n, 100);
  EXPECT_NEAR(sum / n, 15.0, 0.3);
}

TEST(Arbiter, RoundRobinRotatesOnlyOnUpdate) {
  RoundRobinArbiter a;
  a.init(4);
  EXPECT_EQ(a.pick_mask(0b1111), 0);
  EXPECT_EQ(a.pick_mask(0b1111), 0);  // no update: same winner
  a.update(0);
  EXPECT_EQ(a.pick_mask(0b1111), 1);
  a.update(1);
  EXPECT_EQ(a.pick_mask(0b1001), 3);
  a.update(3);
  EXPECT_EQ(a.pick_mask(0b1001), 0);
  EXPECT_EQ(a.pick_list({2, 3}), 2);
  a.update(2);
  EXPECT_EQ(a.pick_list({0, 2}), 0);
  EXPECT_EQ(a.pick_mask(0), -1);
}

TEST(SwitchAllocator, GrantsRotateOverInputsOfOneOutput) {
  SwitchAllocator sa;
  sa.init(4, 2, 3);
  std::vector<int> wins(4, 0);
  TimePs now = 0;
  for (int round = 0; round < 40; ++round) {
    for (std::uint32_t in = 0; in < 4; ++in) {
      sa.set_ready(in, 1, true);
      const auto vc = sa.select(in, now);
      if (vc >= 0) sa.request(in, static_cast<std::uint32_t>(vc), 0);
    }
    const auto g = sa.grant(0);
    ASSERT_GE(g, 0);
    sa.commit(static_cast<std::uint32_t>(g), 0, now + 1);
    ++wins[g];
    ++now;
  }
  for (int w : wins) EXPECT_EQ(w, 10);
}

TEST(SwitchAllocator, InputArbiterAlternatesVcs) {
  SwitchAllocator sa;
  sa.init(1, 4, 4);
  std::vector<int> order;
  for (int i = 0; i < 6; ++i) {
    for (std::uint32_t vc = 0; vc < 3; ++vc) sa.set_ready(0, vc, true);
    const auto vc = sa.select(0, static_cast<TimePs>(i));
    ASSERT_GE(vc, 0);
    sa.request(0, static_cast<std::uint32_t>(vc), static_cast<std::uint32_t>(vc));
    ASSERT_EQ(sa.grant(static_cast<std::uint32_t>(vc)), 0);
    sa.commit(0, static_cast<std::uint32_t>(vc), static_cast<TimePs>(i + 1));
    order.push_back(vc);
  }
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 0, 1, 2}));
}

TEST(Router, HotspotSharesTheContendedOutputFairly) {
  auto b = testing::xbar(8);
  b.net_params();
  b.synthetic("hotspot", 0.5 / 9, 9, 2000, 20000);
  HostedModel m;
  m.configure(b.done(3));
  m.sim().run_until(22000 * 1000ull);
  // Every source offers 0.5 flits/cycle to node 0 (capacity 1): each gets ~1/8 of the output.
  std::vector<double> sent;
  for (auto* t : terminals(m)) sent.push_back(static_cast<double>(t->counters().sent_flits));
  const double mean = std::accumulate(sent.begin(), sent.end(), 0.0) / sent.size();
  for (double s : sent) EXPECT_NEAR(s / mean, 1.0, 0.1);
  const auto& o = switches(m)[0]->output(0).channel().stats();
  EXPECT_GT(static_cast<double>(o.busy_ps) / (22000.0 * 1000), 0.9);  // saturated output stays busy
}

TEST(VcAllocator, ClassesAreDisjoint) {
  const auto req = vc_range(VcClass::kRequest, 8, false), resp = vc_range(VcClass::kResponse, 8, false);
  EXPECT_EQ(req.first + req.count, resp.first);
  EXPECT_EQ(resp.first + resp.count, 8u);
  const auto ld = vc_range(VcClass::kLoad, 8, true), red = vc_range(VcClass::kReduction, 8, true),
             rs = vc_range(VcClass::kResponse, 8, true);
  EXPECT_EQ(ld.first, 0u);
  EXPECT_EQ(ld.first + ld.count, red.first);
  EXPECT_EQ(red.first + red.count, rs.first);
  EXPECT_EQ(rs.first + rs.count, 8u);
  EXPECT_GT(ld.count * red.count * rs.count, 0u);
  // Traffic control splits the request half only: responses keep their VCs, and the load
  // requests (headers only) take one VC of the four, so reductions keep three.
  EXPECT_EQ(rs.first, resp.first);
  EXPECT_EQ(rs.count, resp.count);
  EXPECT_EQ(ld.count, 1u);
  EXPECT_EQ(red.count, 3u);
  EXPECT_EQ(vc_class_of(proto::PKT_CAIS_LD_REQ, true), VcClass::kLoad);
  EXPECT_EQ(vc_class_of(proto::PKT_CAIS_RED, true), VcClass::kReduction);
  EXPECT_EQ(vc_class_of(proto::PKT_WRITE, true), VcClass::kReduction);
  EXPECT_EQ(vc_class_of(proto::PKT_READ_RESP, true), VcClass::kResponse);
  EXPECT_EQ(vc_class_of(proto::PKT_CAIS_RED, false), VcClass::kRequest);
  EXPECT_THROW(vc_range(VcClass::kLoad, 3, true), ConfigError);
}

TEST(VcAllocator, TrafficControlKeepsLoadsAndReductionsApartRoundRobin) {
  VcAllocator va;
  va.init(1, 8, true);
  OutputChannel ch;
  PortLink l;
  l.connected = true;
  l.bw_gbps = 16;
  ch.init(l, 8, 256, 16, 1000);
  const auto ld = vc_range(VcClass::kLoad, 8, true), red = vc_range(VcClass::kReduction, 8, true);
  std::vector<std::int32_t> loads, reds;
  for (int i = 0; i < 6; ++i) {
    const auto a = va.allocate(0, ch, proto::PKT_READ_REQ, 1);
    const auto b = va.allocate(0, ch, proto::PKT_CAIS_RED, 9);
    ASSERT_GE(a, 0);
    ASSERT_GE(b, 0);
    EXPECT_GE(a, static_cast<std::int32_t>(ld.first));
    EXPECT_LT(a, static_cast<std::int32_t>(ld.first + ld.count));
    EXPECT_GE(b, static_cast<std::int32_t>(red.first));
    EXPECT_LT(b, static_cast<std::int32_t>(red.first + red.count));
    loads.push_back(a);
    reds.push_back(b);
    va.release(0, static_cast<std::uint32_t>(a));
    va.release(0, static_cast<std::uint32_t>(b));
  }
  EXPECT_EQ(loads, (std::vector<std::int32_t>{0, 0, 0, 0, 0, 0}));  // the one load VC
  EXPECT_EQ(reds, (std::vector<std::int32_t>{1, 2, 3, 1, 2, 3}));   // round-robin within the class
  // A held VC is not granted twice; credits must cover the whole packet (virtual cut-through).
  VcAllocator v2;
  v2.init(1, 2, false);
  OutputChannel c2;
  c2.init(l, 2, 8, 16, 1000);
  EXPECT_EQ(v2.allocate(0, c2, proto::PKT_READ_REQ, 9), -1);  // 8 credits < 9 flits
  EXPECT_EQ(v2.allocate(0, c2, proto::PKT_READ_REQ, 4), 0);
  EXPECT_EQ(v2.allocate(0, c2, proto::PKT_READ_REQ, 4), -1);  // held
}

TEST(Routing, DeterministicAndSpreadOverSpines) {
  auto b = testing::fat_tree(4, 4, 4);
  b.net_params();
  b.synthetic("uniform", 0.0, 9, 0, 1);
  HostedModel m;
  m.configure(b.done());
  auto sws = switches(m);
  const NvSwitch* leaf0 = sws[0];
  ASSERT_EQ(leaf0->routing().candidates(15).size(), 4u);  // remote GPU: any of 4 spines
  ASSERT_EQ(leaf0->routing().candidates(1).size(), 1u);   // local GPU: its port
  const SwitchContext& ctx = *leaf0;  // what features see
  EXPECT_TRUE(ctx.attached(1));
  EXPECT_FALSE(ctx.attached(15));
  EXPECT_EQ(ctx.port_toward(1), 1u);                    // leaf port g leads to its g-th GPU
  EXPECT_EQ(ctx.port_toward(15), leaf0->routing().candidates(15).front());
  EXPECT_FALSE(static_cast<const SwitchContext&>(*sws[4]).attached(0));  // a spine
  std::map<std::uint32_t, int> use;
  for (std::uint64_t line = 0; line < 4000; ++line) {
    Packet p;
    p.type = proto::PKT_READ_REQ;
    p.dst = 15;
    p.addr = line * 128 + 5;
    const auto port = leaf0->routing().route(p);
    p.src = 3;  // the source and the type do not matter, only the address
    p.type = proto::PKT_READ_RESP;
    EXPECT_EQ(leaf0->routing().route(p), port);
    p.addr = line * 128 + 100;  // same 128 B granule
    EXPECT_EQ(leaf0->routing().route(p), port);
    ++use[port];
  }
  ASSERT_EQ(use.size(), 4u);
  for (const auto& kv : use) EXPECT_NEAR(kv.second, 1000, 150);
  // Requests for one address from every leaf meet at one spine.
  for (std::uint64_t line = 0; line < 200; ++line) {
    Packet p;
    p.type = proto::PKT_CAIS_RED;
    p.addr = line * 128;
    std::set<std::uint32_t> spines;
    for (std::uint32_t leaf = 1; leaf < 4; ++leaf) {
      p.dst = 0;  // home GPU on leaf 0
      const auto port = sws[leaf]->routing().route(p);
      spines.insert(port);  // spine ports are numbered alike on every leaf
    }
    EXPECT_EQ(spines.size(), 1u);
  }
}

TEST(Routing, MultiLevelFabricRoutesAllPairs) {
  auto b = testing::fat_tree(4, 4, 3);
  b.net_params();
  b.synthetic("uniform", 0.0, 9, 0, 1);
  HostedModel m;
  const auto cfg = b.done();
  m.configure(cfg);
  const Sim& sim = m.sim();
  std::map<std::uint32_t, const NvSwitch*> by_node;
  for (auto* s : switches(m)) by_node[s->node_id()] = s;
  // Walk the tables hop by hop from every GPU to every GPU, for several addresses.
  for (std::uint32_t src = 0; src < 16; ++src)
    for (std::uint32_t dst = 0; dst < 16; ++dst)
      for (std::uint64_t addr : {0ull, 128ull, 4096ull, 1ull << 33}) {
        Packet p;
        p.type = proto::PKT_WRITE;
        p.src = src;
        p.dst = dst;
        p.addr = addr;
        std::uint32_t at = sim.node(src).out[0].peer_node;
        int hops = 1;
        while (at != dst) {
          ASSERT_TRUE(by_node.count(at)) << "packet reached a GPU that is not its destination";
          const auto port = by_node[at]->routing().route(p);
          ASSERT_NE(port, kNoRoute) << "no route at node " << at << " to " << dst;
          at = sim.node(at).out[port].peer_node;
          ASSERT_LE(++hops, 4);
        }
        EXPECT_EQ(hops, src / 4 == dst / 4 ? 2 : 4);
      }
  // And run traffic through it end to end.
  auto b2 = testing::fat_tree(4, 4, 3);
  b2.net_params();
  b2.traffic(300);
  HostedModel m2;
  m2.configure(b2.done(5));
  m2.sim().run_until(kNever);
  EXPECT_TRUE(m2.done()) << m2.blocked_reason();
  m2.check_drained();
}

TEST(Router, DgxPlanesCarryRequestsAndResponses) {
  auto b = testing::dgx(8, {5, 4, 4, 5});
  b.bw_gbps = 25;
  b.latency_ps = 250000;
  b.net_params();
  b.traffic(500, 128, 0.5, 32);
  b.set_b("net.traffic_control", true);
  HostedModel m;
  m.configure(b.done(9));
  m.sim().run_until(kNever);
  EXPECT_TRUE(m.done()) << m.blocked_reason();
  m.check_drained();
  std::uint64_t fwd = 0;
  for (auto* s : switches(m)) {
    EXPECT_GT(s->packets_forwarded(), 0u);  // every plane used
    fwd += s->packets_forwarded();
  }
  EXPECT_EQ(fwd, 8u * 500 * 2);  // every request and every response crosses one switch
  proto::Stats st;
  m.export_stats(&st);
  std::map<std::string, const proto::Stat*> by_name;
  for (const auto& x : st.stats()) by_name[x.name()] = &x;
  for (const char* n : {"sw0.port5.tx.payload_bytes", "sw0.port5.tx.bytes.PKT_READ_RESP", "sw0.port5.tx.utilisation",
                        "sw0.port5.tx.busy", "sw0.port5.tx.wire_bytes", "sw0.residence.mean"})
    EXPECT_TRUE(by_name.count(n)) << n;
  const auto* busy = by_name["sw0.port5.tx.busy"];
  ASSERT_NE(busy, nullptr);
  EXPECT_GT(busy->series_size(), 0);
  double total = 0;
  for (double b : busy->series()) {
    EXPECT_LE(b, static_cast<double>(busy->series_bin_ps()) + 1e-6);  // never more than 100 % per bin
    total += b;
  }
  EXPECT_DOUBLE_EQ(total, static_cast<double>(switches(m)[0]->output(5).channel().stats().busy_ps));
}

TEST(Router, FlitLevelOutputSlowerThanTheRouterCycleSendsAtItsLineRate) {
  // gpu0 on 3 lanes sets the router cycle (a flit in 333 ps); the output to gpu1 has 2 lanes
  // (500 ps, 1.5 cycles). gpu0 offers a flit per 333 ps to gpu1, more than that output can
  // take: it must stay busy. Rounding its 1.5 cycles up to 2 would leave it 75 % busy.
  TopoBuilder b;
  const auto g0 = b.node(proto::NODE_GPU, "gpu0"), g1 = b.node(proto::NODE_GPU, "gpu1");
  const auto sw = b.node(proto::NODE_SWITCH, "sw0");
  b.channel(g0, sw, 3);
  b.channel(g1, sw, 2);
  b.net_params(8, 256);
  b.set_s("net.sw_alloc_granularity", "flit");
  b.synthetic("uniform", 1.0 / 9, 9, 0, 1000000);  // each terminal at its own link's rate
  HostedModel m;
  m.configure(b.done(3));
  const TimePs until = 20'000'000;  // 20 us, 40000 flit times of the 2-lane output
  m.sim().run_until(until);
  const double busy = static_cast<double>(switches(m)[0]->output(1).channel().stats().busy_ps) / until;
  EXPECT_GE(busy, 0.97);
}

// An input-queued router without speedup saturates well below its links under uniform traffic
// (head-of-line blocking and one-pass matching: BookSim2's 0.69 at k = 8, docs/VALIDATION.md);
// with an internal speedup of 2 an input moves up to two flits per flit time to different
// outputs and the outputs buffer them, so the same offered load is nearly all delivered.
TEST(Router, InternalSpeedupLiftsSaturationThroughput) {
  std::map<long, double> accepted;
  for (long speedup : {1L, 2L}) {
    TopoBuilder b;
    std::vector<std::uint32_t> gpus;
    for (int g = 0; g < 8; ++g) gpus.push_back(b.node(proto::NODE_GPU, "gpu" + std::to_string(g)));
    const auto sw = b.node(proto::NODE_SWITCH, "sw0");
    for (auto g : gpus) b.channel(g, sw, 1);
    b.net_params(8, 256);
    b.set_s("net.sw_alloc_granularity", "flit");
    b.set("net.internal_speedup", speedup);
    b.synthetic("uniform", 0.95 / 9, 9, 0, 1000000);  // 0.95 flits per node per flit time
    HostedModel m;
    m.configure(b.done(3));
    const TimePs until = 40'000'000;  // 40 us: 62500 flit times of a 25 GB/s lane
    m.sim().run_until(until);
    double flits = 0;
    for (auto* t : terminals(m)) flits += static_cast<double>(t->counters().received_flits);
    accepted[speedup] = flits / 8 / (static_cast<double>(until) / terminals(m)[0]->cycle_ps());
  }
  EXPECT_LT(accepted[1], 0.75);
  EXPECT_GT(accepted[2], 0.9);
}

TEST(Router, InternalSpeedupIsOneToFour) {
  TopoBuilder b;
  const auto g0 = b.node(proto::NODE_GPU, "gpu0"), g1 = b.node(proto::NODE_GPU, "gpu1");
  const auto sw = b.node(proto::NODE_SWITCH, "sw0");
  b.channel(g0, sw, 1);
  b.channel(g1, sw, 1);
  b.net_params(8, 256);
  b.set("net.internal_speedup", 0);
  b.synthetic("uniform", 0.01, 9, 0, 1000);
  HostedModel m;
  try {
    m.configure(b.done(3));
    FAIL() << "internal_speedup 0 accepted";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), "net.internal_speedup");
  }
}

// A feature that answers READ_REQs inside the switch (tests SwitchContext::inject).
class ReflectFeature : public SwitchFeature {
 public:
  Verdict on_arrival(SwitchContext& ctx, std::uint32_t in_port, PacketHandle h) override {
    Packet& p = ctx.packet(h);
    if (p.type != proto::PKT_READ_REQ) return Verdict::kForward;
    const PacketHandle r = ctx.new_packet();
    Packet& q = ctx.packet(r);
    const Packet& req = ctx.packet(h);
    q.type = proto::PKT_READ_RESP;
    q.src = req.dst;
    q.dst = req.src;
    q.addr = req.addr;
    q.tag = req.tag;
    q.inject_ps = req.inject_ps;
    q.payload_bytes = req.aux;
    ctx.release(h);
    ctx.inject(r, in_port, 5000);
    ++answered;
    return Verdict::kConsumed;
  }
  static inline std::uint64_t answered = 0;
};

TEST(Router, FeaturesConsumeAndInject) {
  FeatureRegistry::instance().add("test_reflect",
                                  [](const FeatureArgs&) { return std::make_unique<ReflectFeature>(); });
  auto b = testing::xbar(4);
  b.net_params();
  b.traffic(400, 128, 1.0, 8);
  b.set_s("net.features", "test_reflect");
  HostedModel m;
  ReflectFeature::answered = 0;
  m.configure(b.done(2));
  m.sim().run_until(kNever);
  EXPECT_TRUE(m.done()) << m.blocked_reason();
  m.check_drained();
  EXPECT_EQ(ReflectFeature::answered, 4u * 400);
}

TEST(Router, UnknownFeatureAndBadParamsAreNamed) {
  auto b = testing::xbar(2);
  b.net_params();
  b.traffic(1);
  b.set_s("net.features", "nope");
  HostedModel m;
  try {
    m.configure(b.done());
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), "net.features");
  }
  auto b2 = testing::xbar(2);
  b2.net_params();
  b2.traffic(1);
  b2.set("net.vc_typo", 3);
  HostedModel m2;
  try {
    m2.configure(b2.done());
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), "net.vc_typo");
  }
}

TEST(VcLayout, EightVcsPerLaneOfTheNarrowestLinkAndItsBufferingOnEveryPort) {
  // A 5-lane and two 4-lane GPU-switch channels, as one DGX-H100 GPU's planes: with lane scope
  // every port has 8 VCs per lane of the narrowest link (32) and every port the paper's
  // 8 x 256 flits per lane in total (the 5-lane port: 32 VCs of 320 flits = 40 x 256).
  const auto build = [](const std::string& scope, long per_lane) {
    TopoBuilder b;
    for (std::uint32_t g = 0; g < 3; ++g) b.node(proto::NODE_GPU, "g" + std::to_string(g));
    const auto sw = b.node(proto::NODE_SWITCH, "sw");
    for (std::uint32_t g = 0, lanes[] = {5, 4, 4}; g < 3; ++g) b.channel(g, sw, lanes[g]);
    b.net_params(per_lane, 256);
    b.set_s("net.vc_buffer_scope", scope);
    b.traffic(1);
    return b.done();
  };
  HostedModel lane;
  lane.configure(build("lane", 8));
  const VcLayout l = VcLayout::of(lane.sim());
  EXPECT_EQ(l.vcs, 32u);
  EXPECT_EQ(l.unit_lanes, 4u);
  PortLink five, four;
  five.lanes = 5;
  four.lanes = 4;
  EXPECT_EQ(l.depth(five), 320u);
  EXPECT_EQ(l.depth(four), 256u);
  EXPECT_EQ(l.vcs * l.depth(five), 5u * 8u * 256u);
  lane.sim().run_until(kNever);
  EXPECT_TRUE(lane.done()) << lane.blocked_reason();
  lane.check_drained();

  HostedModel port;  // BookSim's meaning: as given, whatever the lanes
  port.configure(build("port", 8));
  const VcLayout p = VcLayout::of(port.sim());
  EXPECT_EQ(p.vcs, 8u);
  EXPECT_EQ(p.depth(five), 256u);

  HostedModel too_many;  // 16 per lane x 4 lanes: more VCs than the allocators hold
  try {
    too_many.configure(build("lane", 16));
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), "net.vcs_per_port");
    EXPECT_NE(std::string(e.what()).find("64 VCs per port"), std::string::npos) << e.what();
  }
}

TEST(Router, SameSeedSameRunDifferentSeedDifferentRun) {
  auto once = [](std::uint64_t seed) {
    auto b = testing::fat_tree(2, 4, 2);
    b.net_params();
    b.synthetic("uniform", 0.3 / 9, 9, 500, 3000);
    HostedModel m;
    m.configure(b.done(seed));
    m.sim().run_until(5000 * 1000ull);
    std::vector<double> v{static_cast<double>(m.sim().events_processed())};
    for (auto* t : terminals(m)) {
      v.push_back(static_cast<double>(t->counters().received_flits));
      v.push_back(t->counters().latency_sum_cycles);
    }
    return v;
  };
  EXPECT_EQ(once(11), once(11));
  EXPECT_NE(once(11), once(12));
}

TEST(Router, WatchedSwitchTracesPackets) {
  auto b = testing::xbar(2);
  b.net_params();
  b.traffic(1, 128, 1.0, 1);
  auto cfg = b.done();
  cfg.add_watch("sw0");
  HostedModel m;
  m.configure(cfg);
  ::testing::internal::CaptureStderr();
  m.sim().run_until(kNever);
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("| sw0 | arrive port0 vc0 PKT_READ_REQ"), std::string::npos) << err;
  EXPECT_NE(err.find("| sw0 | send PKT_READ_RESP"), std::string::npos) << err;
}

TEST(BooksimConfig, StrictParse) {
  auto c = BooksimConfig::from_string("// comment\ntopology = fly; k = 4; n = 1;\npacket_size = 9; vc_buf_size = 64; // tail\n"
                                      "hotspot_nodes = {1, 2};\ninjection_rate = 0.3; injection_rate_uses_flits = 1;\n");
  EXPECT_EQ(c.get_int("k"), 4);
  EXPECT_EQ(c.get_int_list("hotspot_nodes"), (std::vector<long>{1, 2}));
  EXPECT_DOUBLE_EQ(c.offered_flits(), 0.3);
  c.set_override("injection_rate=0.5");
  EXPECT_DOUBLE_EQ(c.offered_flits(), 0.5);
  const auto cfg = c.to_configure();
  EXPECT_EQ(cfg.topology().nodes_size(), 5);
  try {
    BooksimConfig::from_string("k = 4;\nbogus_key = 1;\n");
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), "bogus_key");
  }
  try {  // a BookSim key is accepted at the value the engine models, other values are refused by name
    BooksimConfig::from_string("speculative = 1;").to_configure();
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), "speculative");
    EXPECT_NE(std::string(e.what()).find("is not modelled (supported: 0)"), std::string::npos);
  }
  EXPECT_THROW(BooksimConfig::from_string("k = 4").to_configure(), ConfigError);  // missing ';'
  EXPECT_THROW(BooksimConfig::from_string("topology = mesh;").to_configure(), ConfigError);
  EXPECT_THROW(BooksimConfig::from_string("n = 2;").to_configure(), ConfigError);
  EXPECT_THROW(BooksimConfig::from_string("traffic = hotspot;").to_configure(), ConfigError);
}

// internal_speedup: 1 to 4 (as "2" or "2.0") maps to net.internal_speedup, with BookSim's 1-cycle
// stages at 1/S cycle and an output buffer of S flits; other values are refused by name.
TEST(BooksimConfig, InternalSpeedup) {
  const auto cfg = BooksimConfig::from_string("internal_speedup = 2.0; output_buffer_size = 2;").to_configure();
  EXPECT_EQ(cfg.params().at("net.internal_speedup").i(), 2);
  EXPECT_DOUBLE_EQ(cfg.params().at("net.routing_delay_ns").d(), 0.5);
  EXPECT_DOUBLE_EQ(cfg.params().at("net.xbar_delay_ns").d(), 0.5);
  EXPECT_DOUBLE_EQ(cfg.params().at("net.credit_delay_ns").d(), 0.0);  // credits: link cycles, as BookSim's
  const auto one = BooksimConfig::from_string("internal_speedup = 1;").to_configure();
  EXPECT_EQ(one.params().at("net.internal_speedup").i(), 1);
  EXPECT_DOUBLE_EQ(one.params().at("net.routing_delay_ns").d(), 1.0);
  for (const char* bad : {"1.5", "5", "0"}) {
    try {
      BooksimConfig::from_string(std::string("internal_speedup = ") + bad + ";", "fly.cfg").to_configure();
      FAIL() << bad;
    } catch (const ConfigError& e) {
      EXPECT_EQ(e.key(), "internal_speedup");
      EXPECT_EQ(std::string(e.what()),
                std::string("internal_speedup: fly.cfg:1: '") + bad + "' is not modelled (supported: 1, 2, 3, 4)");
    }
  }
  try {  // BookSim's unbounded output buffer is not what the engine models at speedup 2
    BooksimConfig::from_string("internal_speedup = 2.0;").to_configure();
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), "output_buffer_size");
  }
  try {
    BooksimConfig::from_string("internal_speedup = 2; output_buffer_size = 2; sw_alloc_delay = 2;").to_configure();
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), "sw_alloc_delay");
  }
}

}  // namespace
}  // namespace cais::net
