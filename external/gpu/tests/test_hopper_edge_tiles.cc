// Edge tiles (isa.proto Instr.rows_in_bounds / row_bytes_in_bounds / value_of_block): a row
// shard that is not whole tiles ends in a tile whose rows past the shard's end are not moved, a
// matrix that is not whole tiles in columns in one whose columns past its last are not, and the
// flag.wait of a partial row block expects its own count. Local and remote tiles move exactly their in-bounds
// rows; a block whose bound is 0 moves nothing; the fields are refused where they mean nothing.
#include <gtest/gtest.h>

#include "hopper_test_util.h"

namespace cais::gpu {
namespace {
using namespace cais::gpu::test;

constexpr std::uint32_t kRowBytes = 64, kTileRows = 4, kShardRows = 10;  // tiles of 4, 4, 2 rows

// in_rows = kShardRows - kTileRows * bx: 10, 6, 2 (clipped to the tile's 4 rows: 4, 4, 2)
void clip(isa::Instr* i, std::int64_t shard_rows = kShardRows) {
  i->mutable_rows_in_bounds()->set_base(shard_rows);
  i->mutable_rows_in_bounds()->set_block_x(-static_cast<std::int64_t>(kTileRows));
  i->mutable_addr()->set_block_x(kTileRows * kRowBytes);
}

TEST(HopperEdgeTiles, ALocalEdgeTileStoresOnlyItsInBoundsRows) {
  auto wl = one_kernel(1, 3, true);
  auto* st = mem(wl, isa::ST, kTileRows, kRowBytes, kRowBytes);
  st->set_value(2);
  clip(st);
  auto r = run(wl);
  EXPECT_EQ(r.stats["gpu0.local.st_bytes"], kShardRows * kRowBytes);
  const std::uint32_t per_row = kRowBytes / 4;
  EXPECT_DOUBLE_EQ(r.gpu(0).mem_value(0, kShardRows * per_row - 1), 2.0);  // last in-bounds element
  EXPECT_DOUBLE_EQ(r.gpu(0).mem_value(0, kShardRows * per_row), 0.0);      // the overhang is untouched
  EXPECT_DOUBLE_EQ(r.stats["gpu0.mem.X.sum"], 2.0 * kShardRows * per_row);
}

TEST(HopperEdgeTiles, ARemoteEdgeTileSendsOnlyItsInBoundsRowsAndATileWhollyOutMovesNothing) {
  auto wl = one_kernel(2, 4, true);  // block 3's bound is 10 - 12 < 0: nothing to move
  wl.mutable_launches(0)->add_gpus(0);
  auto* st = mem(wl, isa::ST_REMOTE, kTileRows, kRowBytes, kRowBytes, 0, 1);
  st->set_value(5);
  clip(st);
  add(wl, isa::BAR);
  auto r = run(wl, 2, true);
  EXPECT_EQ(r.stats["gpu0.tx.WRITE.bytes"], kShardRows * kRowBytes);
  EXPECT_EQ(r.stats["gpu0.rx.WRITE_ACK.packets"], r.stats["gpu0.tx.WRITE.packets"]);
  double sent = 0;
  for (const auto& s : seen()) for (double v : s.values) sent += v;
  EXPECT_DOUBLE_EQ(sent, 5.0 * kShardRows * kRowBytes / 4);
}

// Columns: a 3 x 40-column matrix of 4-byte elements in tiles of 16 columns (16, 16, 8), every
// tile 3 rows at the matrix's row stride; in_bytes = 160 - 64 bx (whole 32 B sectors).
constexpr std::uint32_t kCols = 40, kTileCols = 16, kMatRows = 3, kElem = 4;

void clip_columns(isa::Instr* i) {
  i->mutable_row_bytes_in_bounds()->set_base(kCols * kElem);
  i->mutable_row_bytes_in_bounds()->set_block_x(-static_cast<std::int64_t>(kTileCols * kElem));
  i->mutable_addr()->set_block_x(kTileCols * kElem);
}

TEST(HopperEdgeTiles, AColumnEdgeTileStoresOnlyItsInBoundsColumns) {
  auto wl = one_kernel(1, 3, true);
  auto* st = mem(wl, isa::ST, kMatRows, kTileCols * kElem, kCols * kElem);
  st->set_value(3);
  clip_columns(st);
  auto r = run(wl);
  EXPECT_EQ(r.stats["gpu0.local.st_bytes"], kMatRows * kCols * kElem);
  for (std::uint32_t e = 0; e < kMatRows * kCols; ++e) EXPECT_DOUBLE_EQ(r.gpu(0).mem_value(0, e), 3.0) << e;
  EXPECT_DOUBLE_EQ(r.gpu(0).mem_value(0, kMatRows * kCols), 0.0);  // nothing past the matrix
  EXPECT_DOUBLE_EQ(r.stats["gpu0.mem.X.sum"], 3.0 * kMatRows * kCols);
}

TEST(HopperEdgeTiles, AColumnEdgeTileReducedRemotelySendsEachElementOnce) {
  auto wl = one_kernel(2, 3, true);
  wl.mutable_launches(0)->add_gpus(0);
  auto* red = mem(wl, isa::RED_REMOTE, kMatRows, kTileCols * kElem, kCols * kElem, 0, 1);
  red->set_value(1);
  clip_columns(red);
  add(wl, isa::BAR);
  auto r = run(wl, 2, true);
  EXPECT_EQ(r.stats["gpu0.tx.CAIS_RED.bytes"], kMatRows * kCols * kElem);
  double sent = 0;
  for (const auto& p : seen())
    for (double v : p.values) sent += v;
  EXPECT_DOUBLE_EQ(sent, 1.0 * kMatRows * kCols);
}

TEST(HopperEdgeTiles, AFlagWaitTakesItsBlocksThreshold) {
  // Every block adds 1 to flag 0, then block b waits for b + 1 (value_of_block); `value` 100
  // alone would never be reached, so the run ends only if the per-block threshold is used.
  auto wl = one_kernel(1, 3);
  auto* sig = add(wl, isa::FLAG_SIGNAL);
  sig->set_value(1);
  auto* w = add(wl, isa::FLAG_WAIT);
  w->set_value(100);
  w->mutable_value_of_block()->set_base(1);
  w->mutable_value_of_block()->set_block_x(1);
  auto r = run(wl);
  EXPECT_GT(r.stats["end"], 0);
}

TEST(HopperEdgeTiles, TheFieldsAreRefusedWhereTheyMeanNothing) {
  auto wl = one_kernel();
  add(wl, isa::BAR)->mutable_rows_in_bounds()->set_base(1);
  HostedModel m;
  EXPECT_THROW(m.configure(make_config(wl, 1, false)), ConfigError);
  auto wl2 = one_kernel();
  mem(wl2, isa::ST, 1, 64, 0)->mutable_value_of_block()->set_base(1);
  HostedModel m2;
  EXPECT_THROW(m2.configure(make_config(wl2, 1, false)), ConfigError);
  auto wl3 = one_kernel();
  add(wl3, isa::FLAG_WAIT)->mutable_row_bytes_in_bounds()->set_base(8);
  HostedModel m3;
  EXPECT_THROW(m3.configure(make_config(wl3, 1, false)), ConfigError);
}

// Every run, timing-only too, refuses a tile whose rows leave its buffer (X is 1 MiB): a
// lowering that sized a buffer or a tile grid wrongly fails at its first such instruction.
void expect_extent_error(const isa::Workload& wl, std::uint32_t gpus, const std::string& part) {
  try {
    run(wl, gpus, gpus > 1);
    FAIL() << "no error";
  } catch (const InvariantError& e) {
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

TEST(HopperEdgeTiles, ALoadPastItsBufferIsAnErrorInATimingRun) {
  auto wl = one_kernel(1, 2);  // block 1's 4 contiguous rows of 64 KiB from 832 KiB end 64 KiB past X
  auto* ld = mem(wl, isa::LD, 4, 1 << 16, 1 << 16);
  ld->mutable_addr()->set_block_x(832 << 10);
  expect_extent_error(wl, 1, "kernel 'k' pc 0 block (1, 0): LD of 4 x 65536 B at offset 851968 reaches byte 1114112 "
                             "of buffer 'X' (1048576 B)");
}

TEST(HopperEdgeTiles, ARemoteStoreAndADmaSourcePastTheirBuffersAreErrors) {
  auto wl = one_kernel(2, 1);
  wl.mutable_launches(0)->add_gpus(0);
  mem(wl, isa::ST_REMOTE, 1, 64, 0, (1 << 20) - 32, 1);
  expect_extent_error(wl, 2, "ST_REMOTE of 1 x 64 B at offset 1048544");
  auto wl2 = one_kernel(2, 1);
  wl2.mutable_launches(0)->add_gpus(0);
  auto* push = mem(wl2, isa::DMA_PUSH, 1, 4096, 0, 0, 1);
  push->mutable_src_addr()->set_base((1 << 20) - 1024);
  expect_extent_error(wl2, 2, "source of a DMA_PUSH");
}

TEST(HopperEdgeTiles, AStridedTileMayOverhangTheMatrixEdgeButMustStartInside) {
  // A GEMM's edge tile moves its mean in-bounds extent from its own row and column offset, so
  // it may reach past the matrix's last row or column (harness/gpu/kernels.py, _tile_rows).
  auto wl = one_kernel();
  mem(wl, isa::LD, 8, 512, 1 << 18, (1 << 18) - 256);  // rows from 256 KiB - 256, every 256 KiB: 4 inside
  EXPECT_GT(run(wl).stats["end"], 0);
  auto wl2 = one_kernel();
  mem(wl2, isa::LD, 2, 512, 1 << 18, 1 << 20);  // starts at the end
  expect_extent_error(wl2, 1, "LD of 2 x 512 B at offset 1048576");
}

TEST(HopperEdgeTiles, AColumnClippedTileMustFitItsBufferWhole) {
  // Without the clip the last tile's last row would reach 24 B past the matrix; clipped, a tile
  // is held to its buffer like a contiguous range (no mean-extent overhang).
  auto wl = one_kernel(1, 3);
  auto* ld = mem(wl, isa::LD, 2, 256, 1 << 19, (1 << 20) - (1 << 19) - 128);  // the second row ends 128 B past X
  ld->mutable_row_bytes_in_bounds()->set_base(256);
  expect_extent_error(wl, 1, "LD of 2 x 256 B at offset 524160");
}

}  // namespace
}  // namespace cais::gpu
