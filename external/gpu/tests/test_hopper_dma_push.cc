// DMA pushes issued by the GPU's copy engine (T3, T3-NVLS) through the NVSwitch router: a local
// range written to a peer (plain, or added at the destination) and multicast to the NVLS group
// (store or reduce). Functional values: the sums are what they should be; every push is acked
// before its block retires.
#include <gtest/gtest.h>

#include "hopper_test_util.h"

namespace cais::gpu {
namespace {
using namespace cais::gpu::test;

constexpr std::uint32_t kGpus = 4, kBytes = 1024, kElems = kBytes / 4;

// Buffers: 0 X (fp32, the source: X = rank + 1), 1 MC (multicast), 2 Y, 3 Z, 4 MC2 (multicast).
isa::Workload push_workload() {
  isa::Workload wl = one_kernel(kGpus, 1, true);
  for (const char* n : {"Y", "Z"}) {
    auto* b = wl.add_buffers();
    b->set_name(n);
    b->set_bytes(kBytes);
    b->set_dtype(isa::FP32);
  }
  auto* mc2 = wl.add_buffers();
  mc2->set_name("MC2");
  mc2->set_bytes(kBytes);
  mc2->set_dtype(isa::FP32);
  mc2->set_multicast(true);
  mem(wl, isa::ST, 1, kBytes, 0);  // X = rank + 1
  auto push = [&](isa::Opcode op, std::uint32_t dst, std::int64_t peer_offset) {
    auto* i = mem(wl, op, 1, kBytes, 0);
    i->set_buffer(dst);
    i->set_src_buffer(0);
    i->mutable_peer()->set_gpu(1);
    i->mutable_peer()->set_base(peer_offset);
    i->mutable_peer()->set_modulo(kGpus);
    i->set_is_async(true);
  };
  push(isa::DMA_PUSH, 2, 1);         // Y of g+1 = X of g
  push(isa::DMA_PUSH_REDUCE, 3, 1);  // Z of g+1 += X of g
  push(isa::DMA_PUSH_REDUCE, 3, 2);  // Z of g+2 += X of g
  push(isa::DMA_PUSH_REDUCE, 1, 0);  // MC of every GPU += X of g (multicast reduce)
  add(wl, isa::BAR);                 // retire only when every push is acked
  // GPU 0 alone multicasts a store of its X into MC2
  auto* k = wl.add_kernels();
  *k = wl.kernels(0);
  k->set_name("store");
  k->clear_program();
  auto* st = k->add_program();
  st->set_op(isa::DMA_PUSH);
  st->set_buffer(4);
  st->set_src_buffer(0);
  st->set_rows(1);
  st->set_row_bytes(kBytes);
  auto* la = wl.add_launches();
  la->set_kernel(1);
  la->add_gpus(0);
  la->add_after(0);
  return wl;
}

void check_push_results(bool member_acks) {
  HostedModel h;
  auto c = make_config(push_workload(), kGpus, true);
  use_nvswitch(c, "nvls", member_acks);
  const auto st = run_config(h, c);
  for (std::uint32_t g = 0; g < kGpus; ++g) {
    const auto& gpu = dynamic_cast<const HopperGpu&>(*h.nodes()[g]);
    const double from1 = (g + kGpus - 1) % kGpus + 1, from2 = (g + kGpus - 2) % kGpus + 1;
    for (std::uint32_t e : {0u, kElems / 2, kElems - 1}) {
      EXPECT_EQ(gpu.mem_value(2, e), from1) << "Y of gpu" << g;
      EXPECT_EQ(gpu.mem_value(3, e), from1 + from2) << "Z of gpu" << g;
      EXPECT_EQ(gpu.mem_value(1, e), 1.0 + 2 + 3 + 4) << "MC of gpu" << g;
      EXPECT_EQ(gpu.mem_value(4, e), 1.0) << "MC2 of gpu" << g;
    }
    const std::string n = "gpu" + std::to_string(g);
    const double pkts = kBytes / 128.0;
    const double dma_tx = (g == 0 ? 5 : 4) * pkts;  // 3 unicast + 1 multicast push (+ GPU 0's store)
    EXPECT_EQ(st.at(n + ".tx.DMA.packets"), dma_tx);
    EXPECT_EQ(st.at(n + ".rx.WRITE_ACK.packets"), 3 * pkts);                 // one per unicast write
    EXPECT_EQ(st.at(n + ".rx.MM_ACK.packets"), (g == 0 ? 2 : 1) * pkts);     // one per multicast write
    EXPECT_EQ(st.at(n + ".rx.DMA.packets"), 3 * pkts + 5 * pkts);            // 3 unicast + 5 copies
    EXPECT_EQ(st.at(n + ".tx.MM_ACK.packets"), member_acks ? 5 * pkts : 0);  // member acks of copies
    // the copy engine moved the bytes, the SMs issued nothing remote
    EXPECT_EQ(st.at(n + ".tx.WRITE.packets"), 0);
  }
}

TEST(HopperDmaPush, UnicastAndMulticastPushesWriteAndAddExactly) { check_push_results(false); }

TEST(HopperDmaPush, WithMemberAcksTheMembersAckEveryCopy) { check_push_results(true); }

TEST(HopperDmaPush, AMulticastPushWithoutNvlsIsAnErrorNotASilentUnicast) {
  // Refused when the GPUs decode the workload (net.features names no nvls), before any packet.
  auto c = make_config(push_workload(), kGpus, true);
  use_nvswitch(c, "");
  expect_config_error(c, "kernel 'k' uses multicast (multimem.*, a multicast DMA), which needs the switch feature "
                         "nvls");
}

TEST(HopperDmaPush, CaisGroupSyncWithoutTheSwitchesGroupTableIsAConfigError) {
  auto wl = push_workload();
  auto* cais = wl.mutable_kernels(0)->mutable_cais();
  cais->set_enabled(true);
  cais->set_num_gpus(kGpus);
  cais->set_pre_launch_sync(true);
  auto c = make_config(wl, kGpus, true);
  use_nvswitch(c, "nvls,cais_merge");
  expect_config_error(c, "kernel 'k' uses CAIS group sync (pre-launch or pre-access), which needs the switch "
                         "feature group_sync (got 'nvls,cais_merge'");
}

TEST(HopperDmaPush, APushFromAMulticastBufferIsAConfigError) {
  auto wl = push_workload();
  wl.mutable_kernels(0)->mutable_program(1)->set_src_buffer(1);
  HostedModel h;
  EXPECT_THROW(h.configure(make_config(wl, kGpus, true)), ConfigError);
}

}  // namespace
}  // namespace cais::gpu
