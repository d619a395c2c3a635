// A GPU port's egress arbitration (nvlink_ports.h): the traffic classes take turns packet by
// packet, so a GPU that answers more peer loads than its link carries still sends its own
// requests. With responses always first, its requests waited until the answers' backlog was
// gone, unless the switch happened to run out of credits for the answers (a switch that drains
// its inputs faster, net.internal_speedup = 2, then made a layer's ld.cais requests wait tens
// of microseconds: docs/VALIDATION.md, "A GPU's port").
#include <gtest/gtest.h>

#include <cstdio>

#include "hopper_test_util.h"

namespace cais::gpu {
namespace {
using namespace cais::gpu::test;

constexpr std::uint32_t kSms = 16;
constexpr std::uint32_t kPeerBlockBytes = 256 << 10;  // per block of the peers' loads

struct Result {
  double peers_end_ns = 0, load_end_ns = 0, gpu0_responses = 0;
};

// GPUs 1 and 2 each load 16 x 256 KiB from GPU 0 on 16 SMs (200 GB/s asked of GPU 0's 100 GB/s
// link); on GPU 0 one block computes for about 10 us, then loads 1 KiB from GPU 1.
Result run_burst(bool traffic_control) {
  isa::Workload wl = one_kernel(3, kSms);
  wl.mutable_buffers(0)->set_bytes(kPeerBlockBytes);
  wl.mutable_launches(0)->add_gpus(1);
  wl.mutable_launches(0)->add_gpus(2);
  mem(wl, isa::LD_REMOTE, 1, kPeerBlockBytes, 0, 0, 0);  // from GPU 0
  auto* k2 = add_kernel(wl, "load");
  auto* mma = k2->add_program();  // 2 x 256 x 256 x 320 FLOP at 4096 per cycle: ~10 us
  mma->set_op(isa::MMA);
  mma->set_m(256);
  mma->set_n(256);
  mma->set_k(320);
  auto* ld = k2->add_program();
  ld->set_op(isa::LD_REMOTE);
  ld->set_rows(1);
  ld->set_row_bytes(1024);
  ld->mutable_peer()->set_base(1);
  auto* la = wl.add_launches();
  la->set_kernel(1);
  la->set_stream(1);
  la->add_gpus(0);
  proto::Configure c = make_config(wl, 3, true);
  set_gpu_defaults(c, kSms);
  use_nvswitch(c);
  (*c.mutable_params())["net.functional"].set_b(false);
  (*c.mutable_params())["net.traffic_control"].set_b(traffic_control);
  HostedModel h;
  const auto st = run_config(h, c);
  Result r;
  r.peers_end_ns = std::max(st.at("gpu1.kernel0.k.end"), st.at("gpu2.kernel0.k.end"));
  r.load_end_ns = st.at("gpu0.kernel1.load.end");
  r.gpu0_responses = st.at("gpu0.tx.READ_RESP.packets");
  std::printf("traffic control %d: peers' loads end at %.0f ns, GPU 0's load at %.0f ns\n", traffic_control,
              r.peers_end_ns, r.load_end_ns);
  return r;
}

TEST(HopperPortArbitration, AGpuAnsweringABurstOfPeerLoadsStillSendsItsOwnRequests) {
  for (const bool tc : {false, true}) {
    const Result r = run_burst(tc);
    // Every line of the peers' loads was answered by GPU 0 (128 B lines).
    EXPECT_EQ(r.gpu0_responses, 2.0 * kSms * kPeerBlockBytes / 128);
    // The answers take GPU 0's link for ~85 us; its own 8 requests leave between them: the load
    // ends a few round trips after its ~11 us of compute, long before the burst is answered.
    EXPECT_GT(r.peers_end_ns, 80e3);
    EXPECT_LT(r.load_end_ns, 20e3);
  }
}

}  // namespace
}  // namespace cais::gpu
