// WAIT scope=LOCAL: a block waits for its local loads and stores only; its remote stores stay in
// flight (posted, as an SM's threads leave them) and are still acknowledged before it retires.
#include <gtest/gtest.h>

#include "hopper_test_util.h"

namespace cais::gpu {
namespace {
using namespace cais::gpu::test;

// A 64 KiB remote store, a 1 KiB local load, a wait of `scope`, then 16384 ns of mma.
isa::Workload store_load_wait_mma(isa::Scope scope) {
  auto wl = one_kernel(2);
  wl.mutable_launches(0)->add_gpus(0);
  mem(wl, isa::ST_REMOTE, 1, 65536, 0, 0, 1)->set_is_async(true);
  mem(wl, isa::LD, 1, 1024, 0, 131072)->set_is_async(true);
  add(wl, isa::WAIT)->set_scope(scope);
  auto* m = add(wl, isa::MMA);
  m->set_m(128);
  m->set_n(128);
  m->set_k(2048);  // 2*128*128*2048 FLOP at 4096 FLOP/cycle, 1 GHz = 16384 ns: longer than the acks
  m->set_dtype(isa::BF16);
  return wl;
}

TEST(HopperWaitLocal, LocalWaitLetsPostedRemoteStoresOverlapTheNextWork) {
  const auto all = run(store_load_wait_mma(isa::SCOPE_UNSPECIFIED), 2, true).stats;
  const auto local = run(store_load_wait_mma(isa::LOCAL), 2, true).stats;
  // The load (an HBM miss, ~500 ns) is waited for, the store's 512 acks (64 KiB at 100 GB/s
  // and the round trips through the probe, ~5 us) are not: mma starts ~0.5 us after launch.
  EXPECT_NEAR(local.at("gpu0.finish_time"), (1000 + 10 + 500 + 16384) * 1000.0, 50e3);
  EXPECT_GT(all.at("gpu0.finish_time"), local.at("gpu0.finish_time") + 500e3);
  // The stores are still acknowledged before the block retires, in both forms.
  EXPECT_EQ(local.at("gpu0.rx.WRITE_ACK.packets"), 512);
  EXPECT_EQ(local.at("gpu0.tbs_completed"), 1);
}

// A remote load is data the block reads: the wait covers it (mma starts when it is back).
TEST(HopperWaitLocal, LocalWaitCoversRemoteLoads) {
  const auto program = [](isa::Scope scope) {
    auto wl = one_kernel(2);
    wl.mutable_launches(0)->add_gpus(0);
    mem(wl, isa::LD_REMOTE, 1, 1024, 0, 131072, 1)->set_is_async(true);
    add(wl, isa::WAIT)->set_scope(scope);
    auto* m = add(wl, isa::MMA);
    m->set_m(128);
    m->set_n(128);
    m->set_k(2048);  // 16384 ns
    m->set_dtype(isa::BF16);
    return wl;
  };
  const double all = run(program(isa::SCOPE_UNSPECIFIED), 2, true).stats.at("gpu0.finish_time");
  EXPECT_DOUBLE_EQ(run(program(isa::LOCAL), 2, true).stats.at("gpu0.finish_time"), all);
  EXPECT_GT(all, (1000 + 10 + 500 + 16384) * 1000.0);  // the round trip through the probe (2 x 250 ns) and more
}

// More local ops in flight than a block tracks by time (16): the wait still covers them all.
TEST(HopperWaitLocal, LocalWaitCoversLocalOpsBeyondTheTrackedSixteen) {
  const auto program = [](isa::Scope scope) {
    auto wl = one_kernel();
    add(wl, isa::LOOP)->set_count(24);
    auto* ld = mem(wl, isa::LD, 1, 4096, 0);
    ld->set_is_async(true);
    ld->mutable_addr()->add_loop(4096);  // 24 distinct tiles: HBM misses, queued on the SM port
    add(wl, isa::ENDLOOP);
    add(wl, isa::WAIT)->set_scope(scope);
    auto* m = add(wl, isa::MMA);
    m->set_m(128);
    m->set_n(128);
    m->set_k(64);
    m->set_dtype(isa::BF16);
    return wl;
  };
  const auto all = run(program(isa::SCOPE_UNSPECIFIED)).stats;
  const auto local = run(program(isa::LOCAL)).stats;
  EXPECT_EQ(local.at("gpu0.local.ld_bytes"), 24 * 4096);
  EXPECT_DOUBLE_EQ(local.at("gpu0.finish_time"), all.at("gpu0.finish_time"));
}

}  // namespace
}  // namespace cais::gpu
