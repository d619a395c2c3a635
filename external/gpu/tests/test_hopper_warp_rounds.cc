// Rounds of register loads (Kernel.loads_via_l1): a block's loads since its last store form a
// round that ends when its warps, each returning its loads at gpu.warp_load_bytes_per_cycle and
// queueing at the SM's port, have turned over once (LocalMemory::warp_round_end).
#include <gtest/gtest.h>

#include "hopper_test_util.h"

namespace cais::gpu {
namespace {

using namespace cais::gpu::test;

// One CTA of `threads` threads copying `rounds` rounds of 8 KiB (load, wait, store); ns.
double copy_ns(std::uint32_t threads, bool loads_via_l1, std::uint32_t rounds = 16) {
  isa::Workload wl = one_kernel(1, 1);
  auto* k = wl.mutable_kernels(0);
  k->set_threads_per_block(threads);
  k->set_loads_via_l1(loads_via_l1);
  add(wl, isa::LOOP)->set_count(rounds);
  for (const isa::Opcode op : {isa::LD, isa::WAIT, isa::ST}) {
    auto* i = add(wl, op);
    if (op == isa::WAIT) {
      i->set_scope(isa::LOCAL);
      continue;
    }
    i->set_buffer(0);
    i->set_rows(1);
    i->set_row_bytes(8192);
    i->set_is_async(true);
    i->mutable_addr()->add_loop(8192);
  }
  add(wl, isa::ENDLOOP);
  proto::Configure c = make_config(wl, 1, false);
  (*c.mutable_params())["gpu.warp_load_bytes_per_cycle"].set_d(4.0);  // 4 B/ns per warp at 1 GHz
  HostedModel h;
  const auto st = run_config(h, c);
  return st.at("gpu0.kernel0.k.end") - st.at("gpu0.kernel0.k.first_cta");
}

TEST(HopperWarpRounds, AWarpReturnsItsLoadsAtItsOwnRate) {
  // one warp: each 8 KiB round waits for its bytes at 4 B/ns (2048 ns) on top of the ~520 ns a
  // round takes without the bound (latency, HBM, the fast test port)
  const double one = copy_ns(32, true), plain = copy_ns(32, false);
  EXPECT_NEAR(one - plain, 16 * 2048, 16 * 2048 * 0.05);
  // sixteen warps share the round: 512 B each, 128 ns, of which the 16 ns the 8 KiB stream from
  // HBM (0.5 B/ps) took without the bound overlap
  const double sixteen = copy_ns(512, true), plain16 = copy_ns(512, false);
  EXPECT_NEAR(sixteen - plain16, 16 * (128 - 16), 16 * 112 * 0.05);
  EXPECT_LT(sixteen, one / 3);
}

TEST(HopperWarpRounds, AWarpGroupNeedsItsWarps) {
  isa::Workload wl = one_kernel(1, 1);
  auto* k = wl.mutable_kernels(0);
  k->set_loads_via_l1(true);
  k->add_warp_groups()->set_name("copy");  // no warps
  proto::Configure c = make_config(wl, 1, false);
  HostedModel h;
  EXPECT_THROW(h.configure(c), ConfigError);
  k->mutable_warp_groups(0)->set_warps(5);  // 5 warps of a 128-thread CTA
  c = make_config(wl, 1, false);
  HostedModel h2;
  EXPECT_THROW(h2.configure(c), ConfigError);
}

}  // namespace
}  // namespace cais::gpu
