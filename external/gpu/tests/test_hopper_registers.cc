// Tile registers (isa.proto Instr.reg / src_reg), the functional data path of collectives: an
// NVLS AllReduce (multimem.ld_reduce into a register, multimem.st from it) and a ring
// reduce-scatter (remote store, flag, load, alu add, store) through the NVSwitch router leave
// the exact sums; register misuse is an error naming the kernel and pc.
#include <gtest/gtest.h>

#include <functional>

#include "hopper_test_util.h"

namespace cais::gpu {
namespace {
using namespace cais::gpu::test;

HopperGpu& gpu_of(HostedModel& h, std::uint32_t g) { return *dynamic_cast<HopperGpu*>(h.nodes()[g].get()); }

isa::Buffer* add_buffer(isa::Workload& wl, const char* name, std::uint64_t bytes, bool multicast = false) {
  auto* b = wl.add_buffers();
  b->set_name(name);
  b->set_bytes(bytes);
  b->set_dtype(isa::FP32);
  b->set_multicast(multicast);
  return b;
}

// Configure, set every GPU's initial contents of `buffer` (value(g, element)), run to the end.
std::map<std::string, double> run_with_values(HostedModel& h, const proto::Configure& c, std::uint32_t gpus,
                                              std::uint32_t buffer, std::uint64_t elements,
                                              const std::function<double(std::uint32_t, std::uint64_t)>& value) {
  h.configure(c);
  for (std::uint32_t g = 0; g < gpus; ++g)
    for (std::uint64_t e = 0; e < elements; ++e) gpu_of(h, g).set_mem_value(buffer, e, value(g, e));
  h.sim().run_until(kNever);
  EXPECT_TRUE(h.done()) << h.blocked_reason();
  h.check_drained();
  proto::Stats s;
  h.export_stats(&s);
  std::map<std::string, double> st;
  for (const auto& x : s.stats()) st[x.name()] = x.value();
  return st;
}

// ---------------------------------------------------------------- NVLS AllReduce
// The multicast buffer is R rows of W bytes; GPU g reduces the column slice [g*W/G, (g+1)*W/G)
// of every row, 8 rows per block: tiles with a row stride, so each response packet is placed
// by its address. Initial values differ per GPU and element.
void nvls_all_reduce(std::uint32_t gpus) {
  constexpr std::uint32_t kRows = 16, kRowBytes = 1024, kRowsPerBlock = 8;
  const std::uint32_t slice = kRowBytes / gpus, elements = kRows * kRowBytes / 4;
  isa::Workload wl = one_kernel(gpus, kRows / kRowsPerBlock, true);
  wl.mutable_buffers(1)->set_bytes(kRows * kRowBytes);  // MC
  for (isa::Opcode op : {isa::MM_LD_REDUCE, isa::MM_ST}) {
    auto* i = mem(wl, op, kRowsPerBlock, slice, kRowBytes);
    i->set_buffer(1);
    i->mutable_addr()->set_gpu(slice);
    i->mutable_addr()->set_block_x(kRowsPerBlock * kRowBytes);
    i->set_reg(3);
  }
  add(wl, isa::BAR);
  auto c = make_config(wl, gpus, true);
  use_nvswitch(c, "nvls");
  HostedModel h;
  const auto init = [](std::uint32_t g, std::uint64_t e) { return 1000.0 * (g + 1) + static_cast<double>(e); };
  const auto st = run_with_values(h, c, gpus, 1, elements, init);
  double expect_sum = 0;
  for (std::uint32_t g = 0; g < gpus; ++g)
    for (std::uint64_t e = 0; e < elements; ++e) expect_sum += init(g, e);
  for (std::uint32_t g = 0; g < gpus; ++g) {
    const HopperGpu& gpu = gpu_of(h, g);
    for (std::uint64_t e = 0; e < elements; ++e) {
      double sum = 0;
      for (std::uint32_t m = 0; m < gpus; ++m) sum += init(m, e);
      ASSERT_EQ(gpu.mem_value(1, e), sum) << "gpu" << g << " element " << e;
    }
    const std::string n = "gpu" + std::to_string(g) + ".mem.MC.";
    EXPECT_EQ(st.at(n + "sum"), expect_sum);
    EXPECT_EQ(st.at(n + "min"), 1000.0 * gpus * (gpus + 1) / 2);
    EXPECT_EQ(st.at(n + "max"), 1000.0 * gpus * (gpus + 1) / 2 + gpus * (elements - 1.0));
  }
  EXPECT_EQ(st.at("gpu0.mem.MC.hash"), st.at("gpu1.mem.MC.hash"));  // same contents everywhere
}

TEST(HopperRegisters, NvlsAllReduceOf4GpusLeavesTheSumEverywhere) { nvls_all_reduce(4); }

TEST(HopperRegisters, NvlsAllReduceOf8GpusLeavesTheSumEverywhere) { nvls_all_reduce(8); }

// ---------------------------------------------------------------- ring reduce-scatter
// 3 GPUs, 2 steps: GPU g sends chunk (g-1) to g+1; then adds its own chunk (g-2) to what it
// received and sends that; finally adds chunk g to what it received: the full sum of chunk g.
constexpr std::uint32_t kRing = 3, kChunk = 256;  // bytes per chunk (64 fp32)

isa::Workload ring_reduce_scatter() {
  isa::Workload wl = one_kernel(kRing, 1, true);  // buffer 0: X (the inputs)
  add_buffer(wl, "RECV", 2 * kChunk);             // 2: one slot per step
  add_buffer(wl, "OUT", kRing * kChunk);          // 3
  add_buffer(wl, "F", 64);                        // 4: flags
  auto chunk_of_x = [&](std::int64_t shift, std::uint32_t reg) {  // X chunk (g + shift) mod 3 -> reg
    auto* i = mem(wl, isa::LD, 1, kChunk, 0, shift * kChunk);
    i->mutable_addr()->set_gpu(kChunk);
    i->mutable_addr()->set_modulo(kRing * kChunk);
    i->set_reg(reg);
  };
  auto send = [&](std::uint32_t step) {  // reg 1 -> RECV slot `step` of g+1, then its flag
    auto* s = mem(wl, isa::ST_REMOTE, 1, kChunk, 0, step * kChunk, 1);
    s->set_buffer(2);
    s->mutable_peer()->set_gpu(1);
    s->mutable_peer()->set_modulo(kRing);
    s->set_reg(1);
    auto* f = mem(wl, isa::FLAG_SIGNAL, 1, 8, 0, 8 * step, 1);
    f->set_buffer(4);
    *f->mutable_peer() = s->peer();
    f->set_scope(isa::REMOTE);
    f->set_value(1);
  };
  auto receive_and_add = [&](std::uint32_t step, std::int64_t own_shift) {  // reg 1 = RECV[step] + X chunk
    auto* w = mem(wl, isa::FLAG_WAIT, 1, 8, 0, 8 * step);
    w->set_buffer(4);
    w->set_value(1);
    auto* l = mem(wl, isa::LD, 1, kChunk, 0, step * kChunk);
    l->set_buffer(2);
    l->set_reg(1);
    chunk_of_x(own_shift, 2);
    auto* a = add(wl, isa::ALU);
    a->set_elements(kChunk / 4);
    a->set_flops_per_element(1);
    a->set_reg(1);
    a->set_src_reg(2);
  };
  chunk_of_x(kRing - 1, 1);
  send(0);
  receive_and_add(0, kRing - 2);
  send(1);
  receive_and_add(1, 0);
  auto* out = mem(wl, isa::ST, 1, kChunk, 0);
  out->set_buffer(3);
  out->mutable_addr()->set_gpu(kChunk);
  out->set_reg(1);
  return wl;
}

TEST(HopperRegisters, RingReduceScatterGivesTheExactSum) {
  auto c = make_config(ring_reduce_scatter(), kRing, true);
  use_nvswitch(c);
  HostedModel h;
  const std::uint64_t elems = kRing * kChunk / 4;
  const auto init = [](std::uint32_t g, std::uint64_t e) { return 100.0 * (g + 1) + 0.25 * static_cast<double>(e); };
  const auto st = run_with_values(h, c, kRing, 0, elems, init);
  for (std::uint32_t g = 0; g < kRing; ++g) {
    const HopperGpu& gpu = gpu_of(h, g);
    double out_sum = 0;
    for (std::uint64_t e = 0; e < elems; ++e) {
      const bool mine = e / (kChunk / 4) == g;
      const double expect = mine ? init(0, e) + init(1, e) + init(2, e) : 0.0;
      ASSERT_EQ(gpu.mem_value(3, e), expect) << "OUT of gpu" << g << " element " << e;
      out_sum += expect;
    }
    EXPECT_EQ(st.at("gpu" + std::to_string(g) + ".mem.OUT.sum"), out_sum);
    EXPECT_EQ(st.at("gpu" + std::to_string(g) + ".tx.WRITE.packets"), 2 * kChunk / 128 + 2);  // data + 2 flags
  }
}

// ---------------------------------------------------------------- local tiles, pushes, statistics
TEST(HopperRegisters, ALocalTileIsReadRowMajorAndStoredInAnotherShape) {
  isa::Workload wl = one_kernel(1, 1, true);
  mem(wl, isa::LD, 4, 64, 256)->set_reg(1);          // 4 rows of 16 elements, stride 64 elements
  mem(wl, isa::ST, 2, 128, 0, 4096)->set_reg(1);     // 2 contiguous rows of 32 at element 1024
  mem(wl, isa::ST, 1, 256, 0, 8192, 0)->set_reg(1);  // again, as one run at element 2048
  HostedModel h;
  const auto st = run_with_values(h, make_config(wl, 1, false), 1, 0, 1024, [](std::uint32_t, std::uint64_t e) {
    return static_cast<double>(e);
  });
  const HopperGpu& gpu = gpu_of(h, 0);
  for (std::uint64_t i = 0; i < 64; ++i) {
    const double src = static_cast<double>(i / 16 * 64 + i % 16);  // row-major through the stride
    EXPECT_EQ(gpu.mem_value(0, 1024 + i), src) << i;
    EXPECT_EQ(gpu.mem_value(0, 2048 + i), src) << i;
  }
}

TEST(HopperRegisters, APushSendsTheRegisterInsteadOfItsSource) {
  isa::Workload wl = one_kernel(2, 1, true);
  add_buffer(wl, "Y", 1024);  // 2
  mem(wl, isa::LD, 1, 512, 0)->set_reg(1);
  auto* a = add(wl, isa::ALU);  // reg 1 doubled
  a->set_reg(1);
  a->set_src_reg(1);
  a->set_elements(128);
  auto* p = mem(wl, isa::DMA_PUSH, 1, 512, 0, 0, 1);
  p->set_buffer(2);
  p->set_src_buffer(0);
  p->mutable_peer()->set_gpu(1);
  p->mutable_peer()->set_modulo(2);
  p->set_reg(1);
  auto c = make_config(wl, 2, true);
  use_nvswitch(c);
  HostedModel h;
  run_with_values(h, c, 2, 0, 128, [](std::uint32_t g, std::uint64_t e) { return 10.0 * g + e; });
  for (std::uint32_t g = 0; g < 2; ++g)
    for (std::uint64_t e = 0; e < 128; ++e) EXPECT_EQ(gpu_of(h, g).mem_value(2, e), 2 * (10.0 * (1 - g) + e));
}

TEST(HopperRegisters, TheBufferHashSeesOrderNotOnlyTheSum) {
  isa::Workload wl = one_kernel(1, 1, true);
  add(wl, isa::BAR);
  std::map<std::string, double> st[2];
  for (int swap = 0; swap < 2; ++swap) {
    HostedModel h;
    st[swap] = run_with_values(h, make_config(wl, 1, false), 1, 0, 4, [&](std::uint32_t, std::uint64_t e) {
      return static_cast<double>(swap && e < 2 ? 1 - e : e) - 1.5;
    });
  }
  EXPECT_EQ(st[0].at("gpu0.mem.X.sum"), st[1].at("gpu0.mem.X.sum"));
  EXPECT_EQ(st[0].at("gpu0.mem.X.min"), -1.5);
  EXPECT_EQ(st[0].at("gpu0.mem.X.max"), 1.5);
  EXPECT_NE(st[0].at("gpu0.mem.X.hash"), st[1].at("gpu0.mem.X.hash"));
  EXPECT_LT(st[0].at("gpu0.mem.X.hash"), 4503599627370496.0);  // 52 bits: exact in a double
}

// ---------------------------------------------------------------- errors
void expect_invariant(const isa::Workload& wl, std::uint32_t gpus, const std::vector<std::string>& parts) {
  auto c = make_config(wl, gpus, gpus > 1);
  if (gpus > 1) use_nvswitch(c, "nvls");
  HostedModel h;
  h.configure(c);
  try {
    h.sim().run_until(kNever);
    FAIL() << "ran without an error";
  } catch (const InvariantError& e) {
    for (const auto& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  }
}

TEST(HopperRegisters, AStoreOfTheWrongSizeIsAnError) {
  isa::Workload wl = one_kernel(1, 1, true);
  mem(wl, isa::LD, 1, 128, 0)->set_reg(1);
  mem(wl, isa::ST, 1, 64, 0, 512)->set_reg(1);
  expect_invariant(wl, 1, {"kernel 'k' pc 1", "register 1 holds 32 values, the tile has 16"});
}

TEST(HopperRegisters, AnAluAddOfDifferentSizesIsAnError) {
  isa::Workload wl = one_kernel(1, 1, true);
  mem(wl, isa::LD, 1, 128, 0)->set_reg(1);
  mem(wl, isa::LD, 1, 64, 0)->set_reg(2);
  auto* a = add(wl, isa::ALU);
  a->set_reg(1);
  a->set_src_reg(2);
  expect_invariant(wl, 1, {"kernel 'k' pc 2", "alu adds register 2"});
}

TEST(HopperRegisters, AStoreBeforeItsLocalLoadCompletedIsAnError) {
  isa::Workload wl = one_kernel(1, 1, true);
  auto* l = mem(wl, isa::LD, 1, 128, 0);
  l->set_reg(1);
  l->set_is_async(true);
  mem(wl, isa::ST, 1, 128, 0, 512)->set_reg(1);
  expect_invariant(wl, 1, {"kernel 'k' pc 1", "reads register 1 before its load (pc 0) completed"});
  // with a WAIT covering the load it is a correct program
  wl.mutable_kernels(0)->mutable_program()->Add()->set_op(isa::WAIT);
  wl.mutable_kernels(0)->mutable_program()->SwapElements(1, 2);
  EXPECT_NO_THROW(run(wl));
}

TEST(HopperRegisters, AStoreBeforeItsRemoteLoadCompletedIsAnError) {
  isa::Workload wl = one_kernel(2, 1, true);
  auto* l = mem(wl, isa::MM_LD_REDUCE, 1, 128, 0);
  l->set_buffer(1);
  l->set_reg(2);
  l->set_is_async(true);
  auto* s = mem(wl, isa::MM_ST, 1, 128, 0);
  s->set_buffer(1);
  s->set_reg(2);
  expect_invariant(wl, 2, {"kernel 'k' pc 1", "reads register 2 before its load (pc 0) completed"});
}

TEST(HopperRegisters, RemoteRegisterTilesMustBeCarriedExactlyByPackets) {
  isa::Workload wl = one_kernel(2, 1, true);
  auto* l = mem(wl, isa::LD_REMOTE, 1, 48, 0, 0, 1);  // 48 B: not whole sectors
  l->set_reg(1);
  expect_invariant(wl, 2, {"kernel 'k' pc 0", "32 B aligned"});
  l->set_row_bytes(32);
  l->set_rows(2);
  l->set_row_stride(64);  // two rows with a gap in one 128 B packet line
  expect_invariant(wl, 2, {"kernel 'k' pc 0", "outside the tile"});
}

TEST(HopperRegisters, RegisterOperandsAreCheckedWhenTheWorkloadIsRead) {
  const auto bad = [](const std::function<void(isa::Instr*)>& set, const std::string& why) {
    isa::Workload wl = one_kernel(1, 1, false);  // checked in timing-only workloads too
    set(mem(wl, isa::LD, 1, 128, 0));
    expect_config_error(wl, why);
  };
  bad([](isa::Instr* i) { i->set_reg(9); }, "reg and src_reg are 1..8");
  bad([](isa::Instr* i) { i->set_op(isa::BAR), i->set_reg(1); }, "BAR takes no register");
  bad([](isa::Instr* i) { i->set_op(isa::DMA_COPY), i->set_reg(1); }, "DMA_COPY takes no register");
  bad([](isa::Instr* i) { i->set_reg(1), i->set_src_reg(2); }, "src_reg belongs to an alu");
  bad([](isa::Instr* i) { i->set_op(isa::ALU), i->set_src_reg(2); }, "src_reg belongs to an alu");
}

TEST(HopperRegisters, TimingOnlyRunsIgnoreRegisters) {
  isa::Workload wl = one_kernel(1, 1, false);
  auto* l = mem(wl, isa::LD, 1, 128, 0);
  l->set_reg(1);
  l->set_is_async(true);
  mem(wl, isa::ST, 1, 64, 0, 512)->set_reg(1);  // wrong size and not waited for: not checked
  const auto with = run(wl).stats;
  wl.mutable_kernels(0)->mutable_program(0)->set_reg(0);
  wl.mutable_kernels(0)->mutable_program(1)->set_reg(0);
  const auto without = run(wl).stats;
  for (const auto& [k, v] : without)
    if (k != "engine.wall_time") {
      EXPECT_EQ(with.at(k), v) << k;
    }
  EXPECT_EQ(with.count("gpu0.mem.X.sum"), 0u);
}

}  // namespace
}  // namespace cais::gpu
