// Posted SM stores (gpu.posted_stores): an SM's remote stores hold none of its
// max_outstanding_per_sm load slots; the NVLink port's credits pace them instead, and their acks
// still complete the instruction. Hardware: one CTA writes 42-44 GB/s to a peer
// (harness/data/measured/h200x2_p2p_ctas.csv), above the ~27 GB/s that 256 slots per ~1.2 us
// round trip allow, so stores are not slot-bound there.
#include <gtest/gtest.h>

#include <cstdio>

#include "hopper_test_util.h"

namespace cais::gpu {
namespace {
using namespace cais::gpu::test;

constexpr std::uint32_t kStoreBytes = 1 << 20;

struct StoreRun {
  double gbps = 0;       // one block's store bytes over its kernel's time
  double link_util = 0;  // the GPU's link, wire bytes (headers included)
  std::map<std::string, double> st;
};

// One block (one SM) stores 1 MiB to GPU 1 through the NVSwitch router at the harness's default
// network (8 VCs x 256 flits per lane, a 4-lane 100 GB/s port); 256 slots per SM, as the default.
StoreRun one_sm_stores(bool posted, const std::string& vc_scope = "lane", std::int64_t vc_depth = 256,
                       double sm_store_bytes_per_cycle = 1000) {
  isa::Workload wl = one_kernel(2, 1);
  wl.mutable_buffers(0)->set_bytes(kStoreBytes);
  wl.mutable_launches(0)->add_gpus(0);
  mem(wl, isa::ST_REMOTE, 1, kStoreBytes, 0, 0, 1);
  proto::Configure c = make_config(wl, 2, true);
  set_gpu_defaults(c, 1);
  use_nvswitch(c);
  auto& m = *c.mutable_params();
  m["gpu.max_outstanding_per_sm"].set_i(256);
  m["gpu.posted_stores"].set_b(posted);
  m["net.functional"].set_b(false);
  m["net.vc_buffer_scope"].set_s(vc_scope);
  m["net.vc_depth_flits"].set_i(vc_depth);
  m["gpu.sm_store_bytes_per_cycle"].set_d(sm_store_bytes_per_cycle);
  HostedModel h;
  StoreRun r;
  r.st = run_config(h, c);
  const auto& L = dynamic_cast<const HopperGpu&>(*h.nodes()[0]).launch_state(0);
  const double window_ps = static_cast<double>(L.end_ps - L.start_ps);
  r.gbps = kStoreBytes / window_ps * 1000.0;
  r.link_util = r.st.at("gpu0.port0.tx.flits") * 16 / (0.1 * window_ps);
  std::printf("posted %d, VC buffers per %s: %.1f GB/s, link %.3f\n", posted, vc_scope.c_str(), r.gbps, r.link_util);
  return r;
}

TEST(HopperPostedStores, OneSmsStoresAreNotBoundByItsLoadSlots) {
  const StoreRun posted = one_sm_stores(true);
  // 8192 packets of 128 B: the link, not 256 slots per round trip, limits one SM's stores.
  EXPECT_GE(posted.link_util, 0.9) << posted.gbps << " GB/s";
  EXPECT_EQ(posted.st.at("gpu0.stall.outstanding_limit"), 0);
  // Every store is still acknowledged, and the kernel ends only after the last ack.
  EXPECT_EQ(posted.st.at("gpu0.rx.WRITE_ACK.packets"), kStoreBytes / 128);
  EXPECT_EQ(posted.st.at("gpu0.tbs_completed"), 1);
}

// A store's data leaves the SM through the SM's port: at an H100's 32 B per clock (1 GHz here:
// 32 GB/s, a third of the link) the port, not the link, sets one SM's rate, and the queue waits
// for it (stall.sm_port) rather than piling packets up at the NVLink port.
TEST(HopperPostedStores, OneSmsStoresLeaveAtItsPortsStoreRate) {
  const StoreRun r = one_sm_stores(true, "lane", 256, 32.0);
  // never above the port's rate; below it by the last store's trip and ack (~1 us of ~33)
  EXPECT_LE(r.gbps, 32.0);
  EXPECT_GE(r.gbps, 32.0 * 0.94);
  EXPECT_GT(r.st.at("gpu0.stall.sm_port"), 0);
  EXPECT_EQ(r.st.at("gpu0.rx.WRITE_ACK.packets"), kStoreBytes / 128);
  const StoreRun fast = one_sm_stores(true);  // a port faster than the link: the link's rate
  EXPECT_GT(fast.gbps, 2.5 * r.gbps);
}

TEST(HopperPostedStores, StoresHoldingLoadSlotsAreBoundByTheRoundTrip) {
  const StoreRun held = one_sm_stores(false);
  const StoreRun posted = one_sm_stores(true);
  EXPECT_GT(held.st.at("gpu0.stall.outstanding_limit"), 0);
  EXPECT_LT(held.gbps, 0.8 * posted.gbps) << held.gbps << " vs " << posted.gbps << " GB/s";
}

// With 256 flits per VC for the whole port the network's buffers, not the SM, limit the stores:
// the SM waits for credits (stall.post_credits) instead of queueing its stores at the port.
TEST(HopperPostedStores, CreditsPaceTheStoresWhenTheNetworkBuffersAreSmall) {
  const StoreRun small = one_sm_stores(true, "port", 256);
  EXPECT_GT(small.st.at("gpu0.stall.post_credits"), 0);
  EXPECT_EQ(small.st.at("gpu0.rx.WRITE_ACK.packets"), kStoreBytes / 128);
  const StoreRun held = one_sm_stores(false, "port", 256);  // the same credits bind either way
  EXPECT_NEAR(small.gbps, held.gbps, 0.1 * held.gbps);
}

// A load behind a large store: with posted stores its requests leave at once, instead of
// waiting in the SM's issue queue for the store's acks to free slots.
TEST(HopperPostedStores, ALoadAfterAStoreDoesNotWaitForTheStoresAcks) {
  const auto program = [](bool posted) {
    isa::Workload wl = one_kernel(2);
    wl.mutable_launches(0)->add_gpus(0);
    mem(wl, isa::ST_REMOTE, 1, 65536, 0, 0, 1)->set_is_async(true);  // 512 lines, 8 x the 64 slots
    mem(wl, isa::LD_REMOTE, 1, 1024, 0, 131072, 1)->set_is_async(true);
    add(wl, isa::WAIT)->set_scope(isa::LOCAL);  // the load only
    auto* mma = add(wl, isa::MMA);  // 16384 ns at 1 GHz: longer than the store's acks
    mma->set_m(128);
    mma->set_n(128);
    mma->set_k(2048);
    mma->set_dtype(isa::BF16);
    proto::Configure c = make_config(wl, 2, true);
    use_nvswitch(c);
    (*c.mutable_params())["net.functional"].set_b(false);
    (*c.mutable_params())["gpu.posted_stores"].set_b(posted);
    HostedModel h;
    return run_config(h, c).at("gpu0.finish_time");
  };
  // The load issues behind the store in the SM's queue. posted: once the store's lines are on
  // their way (the port's credits hold them all), one round trip, then mma; held: its requests
  // also wait for 448 of the store's acks (64 slots) first.
  const double posted = program(true), held = program(false);
  std::printf("finish: posted %.0f ns, held %.0f ns\n", posted / 1000, held / 1000);
  EXPECT_LT(posted, (1000 + 10 + 3000 + 16384) * 1000.0);
  EXPECT_GT(held, posted + 1000e3);
}

// Requests and posted writes take turns at a GPU port: a load issued by one SM while another
// SM streams stores through the same link gets its requests out within the stream, instead of
// after it (posted stores are admitted as fast as credits return, so with posts always served
// first the request class would wait for the whole stream).
TEST(HopperPostedStores, ALoadFromAnotherSmIsNotStarvedByAStoreStream) {
  isa::Workload wl = one_kernel(2);
  wl.mutable_buffers(0)->set_bytes(kStoreBytes);
  wl.mutable_launches(0)->add_gpus(0);
  mem(wl, isa::ST_REMOTE, 1, kStoreBytes, 0, 0, 1);  // kernel 0: 1 MiB, ~10 us at 100 GB/s
  auto* k2 = add_kernel(wl, "load");
  auto* ld = k2->add_program();
  ld->set_op(isa::LD_REMOTE);
  ld->set_rows(1);
  ld->set_row_bytes(1024);
  ld->mutable_peer()->set_base(1);
  auto* la = wl.add_launches();
  la->set_kernel(1);
  la->set_stream(1);
  la->add_gpus(0);
  wl.mutable_launches(0)->set_sm_count(1);  // the stores on SM 0, the load on SM 1
  la->set_sm_first(1);
  la->set_sm_count(1);
  proto::Configure c = make_config(wl, 2, true);
  set_gpu_defaults(c, 2);
  use_nvswitch(c);
  (*c.mutable_params())["net.functional"].set_b(false);
  HostedModel h;
  const auto st = run_config(h, c);
  const double store_end = st.at("gpu0.kernel0.k.end"), load_end = st.at("gpu0.kernel1.load.end");
  std::printf("store kernel ends at %.0f ns, load kernel at %.0f ns\n", store_end, load_end);
  EXPECT_LT(load_end, 0.5 * store_end);
}

// An SM's remote stores queue at its port with its local ones: a store op's bytes join the
// port's queue when its first line may go, as a warp's store instructions enter the SM's memory
// pipeline when it issues them, whatever their address. A copy stream (32 KiB rounds: a load,
// then a store of the same bytes, as NCCL's scatter and gather copies run) on the same SM then
// delays a 64 KiB remote store by the copy round queued ahead of it, not by a copy round per
// packet (which, when each packet booked the port only once the one before it had crossed, made
// NCCL's NVLS reduce group wait out its scatter and gather copies: docs/VALIDATION.md "One SM's
// port").
TEST(HopperPostedStores, RemoteStoresShareTheSmPortWithLocalCopies) {
  const auto run_pair = [](bool with_copies) {
    isa::Workload wl = one_kernel(2);
    wl.mutable_buffers(0)->set_bytes(4 << 20);
    wl.mutable_launches(0)->add_gpus(0);
    mem(wl, isa::ST_REMOTE, 1, 65536, 0, 0, 1);  // kernel 0: 64 KiB to GPU 1, 2 us at the port alone
    if (with_copies) {
      auto* k2 = add_kernel(wl, "copy");
      auto* loop = k2->add_program();
      loop->set_op(isa::LOOP);
      loop->set_count(32);
      const auto copy = [&](isa::Opcode op, std::int64_t base) {
        auto* i = k2->add_program();
        i->set_op(op);
        i->set_rows(1);
        i->set_row_bytes(32768);
        i->mutable_addr()->set_base(base);
        i->mutable_addr()->add_loop(32768);
        i->set_is_async(true);
      };
      copy(isa::LD, 1 << 20);
      k2->add_program()->set_op(isa::WAIT);
      k2->mutable_program(2)->set_scope(isa::LOCAL);
      copy(isa::ST, 2 << 20);
      k2->add_program()->set_op(isa::ENDLOOP);
      auto* la = wl.add_launches();
      la->set_kernel(1);
      la->set_stream(1);
      la->add_gpus(0);
    }
    wl.mutable_launches(0)->set_start_ns(5000);  // the copies (if any) run by then
    proto::Configure c = make_config(wl, 2, true);
    set_gpu_defaults(c, 1);  // one SM: both kernels on it
    use_nvswitch(c);
    auto& m = *c.mutable_params();
    m["net.functional"].set_b(false);
    m["gpu.sm_store_bytes_per_cycle"].set_d(32.0);   // an H100's rates, at 1 GHz
    m["gpu.sm_load_bytes_per_cycle"].set_d(116.0);
    m["gpu.warp_load_bytes_per_cycle"].set_d(116.0);
    HostedModel h;
    const auto st = run_config(h, c);
    return st.at("gpu0.kernel0.k.end") - st.at("gpu0.kernel0.k.start");
  };
  const double alone = run_pair(false), beside = run_pair(true);
  std::printf("64 KiB of remote stores: %.0f ns alone, %.0f ns beside a copy stream\n", alone, beside);
  EXPECT_GT(alone, 2048);  // 64 KiB at 32 B per ns
  // Beside the copies the stores wait for the copy round queued ahead of them (1 us of stores
  // and 0.3 us of loads on the port), then cross; one 128 B packet per copy round would take
  // the whole copy stream (~40 us).
  EXPECT_GT(beside, alone + 500);
  EXPECT_LT(beside, 3.0 * alone);
}

}  // namespace
}  // namespace cais::gpu
