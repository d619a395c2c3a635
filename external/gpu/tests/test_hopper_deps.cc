// Thread-block dependencies of the Hopper GPU: ranges keyed on the consumer's linear block id
// (the original form), on its block_y (producer rows of blocks) or block_x (producer columns),
// and the configuration error for a producer that does not run on the consumer's GPU.
//
// The producer's blocks run an mma and then store 1.0 into their element of X; on 4 SMs its 12
// blocks finish in three waves (block b on SM b % 4). Each consumer tile loads the 3 elements
// its dependency should have waited for, so ld_value_sum is 12 x 3 = 36 exactly when every
// tile started after the producer blocks it needs.
#include <gtest/gtest.h>

#include "hopper_test_util.h"

namespace cais::gpu {
namespace {
using namespace cais::gpu::test;

// X element of producer block (bx, by): row-major rows of 3 (ROW) or columns of 3 (COLUMN).
void set_elem(isa::Affine* a, bool rows) {
  a->set_block_x(rows ? 4 : 12);
  a->set_block_y(rows ? 12 : 4);
}

isa::Workload keyed(isa::DepKey key) {
  const bool rows = key == isa::ROW;
  isa::Workload wl;
  wl.set_name("deps");
  wl.set_num_gpus(1);
  wl.set_functional(true);
  auto* b = wl.add_buffers();
  b->set_name("X");
  b->set_bytes(4096);
  b->set_dtype(isa::FP32);
  // producer grid: rows of 3 blocks (ROW) / columns of 3 blocks (COLUMN), 12 blocks either way
  auto* p = add_kernel(wl, "producer", rows ? 3 : 4, rows ? 4 : 3);
  auto* m = p->add_program();
  m->set_op(isa::MMA);
  m->set_m(128);
  m->set_n(128);
  m->set_k(640);
  auto* st = p->add_program();
  st->set_op(isa::ST);
  st->set_rows(1);
  st->set_row_bytes(4);
  set_elem(st->mutable_addr(), rows);
  // consumer: same grid; tile (bx, by) loads its row by (ROW) / column bx (COLUMN) of X
  auto* c = add_kernel(wl, "consumer", p->grid_x(), p->grid_y());
  auto* ld = c->add_program();
  ld->set_op(isa::LD);
  ld->set_rows(1);
  ld->set_row_bytes(12);
  if (rows) ld->mutable_addr()->set_block_y(12);
  else ld->mutable_addr()->set_block_x(12);
  wl.add_launches()->set_kernel(0);
  auto* la = wl.add_launches();
  la->set_kernel(1);
  la->set_stream(1);
  auto* d = la->add_deps();
  d->set_producer(0);
  d->set_key(key);
  d->set_scale_num(1);
  d->set_scale_den(1);
  return wl;
}

TEST(HopperDeps, RowKeyedTilesWaitForEveryProducerBlockOfTheirRow) {
  auto r = run(keyed(isa::ROW));
  EXPECT_EQ(r.stats["gpu0.ld_value_sum"], 36.0);
  EXPECT_EQ(r.stats["gpu0.tbs_completed"], 24.0);
}

TEST(HopperDeps, ColumnKeyedTilesWaitForEveryProducerBlockOfTheirColumn) {
  auto r = run(keyed(isa::COLUMN));
  EXPECT_EQ(r.stats["gpu0.ld_value_sum"], 36.0);
}

TEST(HopperDeps, TheLinearFormKeepsItsMeaningOneProducerBlockPerConsumerBlock) {
  // Same workload, ranges over linear ids: tile b waits only for producer block b, so tiles
  // whose row (column) is finished by a later wave read zeros.
  for (auto key : {isa::ROW, isa::COLUMN}) {
    auto wl = keyed(key);
    wl.mutable_launches(1)->mutable_deps(0)->set_key(isa::LINEAR);
    auto r = run(wl);
    EXPECT_LT(r.stats["gpu0.ld_value_sum"], 36.0);
    EXPECT_GE(r.stats["gpu0.ld_value_sum"], 12.0);  // each tile saw at least its own block's value
  }
  // b*num/den + [lo, hi]: tile b waits for producer blocks [b, b + 11]: everything after it.
  auto wl = keyed(isa::ROW);
  wl.mutable_launches(1)->mutable_deps(0)->set_key(isa::LINEAR);
  wl.mutable_launches(1)->mutable_deps(0)->set_scale_num(0);
  wl.mutable_launches(1)->mutable_deps(0)->set_hi(11);
  auto r = run(wl);
  EXPECT_EQ(r.stats["gpu0.ld_value_sum"], 36.0);
}

TEST(HopperDeps, AProducerThatDoesNotRunOnTheConsumersGpuIsAConfigError) {
  auto wl = keyed(isa::ROW);
  wl.set_num_gpus(2);
  wl.mutable_launches(0)->add_gpus(1);  // the producer runs on GPU 1 only
  HostedModel m;
  try {
    m.configure(make_config(wl, 2, false));
    FAIL() << "a dependency on another GPU's launch was accepted";
  } catch (const ConfigError& e) {
    const std::string w = e.what();
    EXPECT_NE(w.find("launch 1 of 'consumer' depends on launch 0 of 'producer'"), std::string::npos) << w;
    EXPECT_NE(w.find("GPU 0"), std::string::npos) << w;
  }
}

}  // namespace
}  // namespace cais::gpu
