// The decoded tile-ISA workload (proto/isa.proto) shared by every GPU of one process: programs
// with matched loops, buffer placement in a symmetric heap, and address helpers.
#pragma once
#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "isa.pb.h"

namespace cais::gpu {

// Global addresses: unicast (owner << 40) | heap offset; multicast objects set bit 62.
inline constexpr std::uint64_t kOwnerShift = 40;
inline constexpr std::uint64_t kOffsetMask = (1ull << kOwnerShift) - 1;
inline constexpr std::uint64_t kMulticastBit = 1ull << 62;
// Tile registers per thread block (isa.proto Instr.reg: 1..kMaxRegisters, 0 = none).
inline constexpr std::uint32_t kMaxRegisters = 8;

inline std::uint64_t unicast_addr(std::uint32_t owner, std::uint64_t off) {
  return (static_cast<std::uint64_t>(owner) << kOwnerShift) | off;
}

// One instruction stream: a kernel's program, or one warp group's (isa.proto Kernel.warp_groups).
struct DecodedProgram {
  const google::protobuf::RepeatedPtrField<isa::Instr>* ins = nullptr;
  std::vector<std::uint32_t> match;  // LOOP -> its ENDLOOP, ENDLOOP -> its LOOP
  std::uint32_t warps = 1;           // the warps that run it (WarpGroup.warps, or the CTA's)
};

struct DecodedKernel {
  const isa::Kernel* k = nullptr;
  std::vector<DecodedProgram> programs;  // `program`, or one per warp group (a block runs them all)
  std::uint32_t max_loop_depth = 0;
  std::uint32_t num_blocks = 0;
  bool uses_remote = false;
  bool uses_multicast = false;  // multimem.* or a DMA into a multicast buffer: switches replicate (NVLS)
  bool uses_group_sync = false;  // SYNC_REQ (CAIS pre-launch or pre-access sync): the switches' group table
  bool uses_mma = false;  // some instruction is an mma (the clock under tensor-core load)
};

struct DecodedBuffer {
  const isa::Buffer* b = nullptr;
  std::uint64_t base = 0;       // offset in the symmetric heap
  std::uint32_t elem_bytes = 2;
};

class Workload {
 public:
  // Throws ConfigError("workload", ...) naming the kernel and instruction at fault.
  static std::shared_ptr<const Workload> parse(const std::string& bytes, std::uint32_t num_gpus);

  const isa::Workload& proto() const { return wl_; }
  const std::vector<DecodedKernel>& kernels() const { return kernels_; }
  const std::vector<DecodedBuffer>& buffers() const { return buffers_; }
  std::uint64_t heap_bytes() const { return heap_bytes_; }
  bool empty() const { return wl_.launches_size() == 0; }

 private:
  isa::Workload wl_;
  std::vector<DecodedKernel> kernels_;
  std::vector<DecodedBuffer> buffers_;
  std::uint64_t heap_bytes_ = 0;
};

// value of an affine expression (see isa.proto)
template <class Linear>
inline std::int64_t eval_linear(const Linear& a, std::int64_t bx, std::int64_t by, std::int64_t g,
                                const std::int64_t* loops, std::uint32_t depth) {
  std::int64_t v = a.base() + a.block_x() * bx + a.block_y() * by + a.gpu() * g;
  const int n = std::min<int>(a.loop_size(), static_cast<int>(depth));
  for (int i = 0; i < n; ++i) v += a.loop(i) * loops[i];
  return v;
}

inline std::int64_t floor_div(std::int64_t a, std::int64_t b) {
  const std::int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

inline std::int64_t eval_affine(const isa::Affine& a, std::int64_t bx, std::int64_t by, std::int64_t g,
                                const std::int64_t* loops, std::uint32_t depth) {
  std::int64_t v = eval_linear(a, bx, by, g, loops, depth);
  for (const isa::Quotient& q : a.quotient())
    v += q.scale() * floor_div(eval_linear(q, bx, by, g, loops, depth), q.divisor());
  if (a.modulo() > 0) {
    v %= a.modulo();
    if (v < 0) v += a.modulo();
  }
  return v;
}

// Rows a memory instruction moves for the block: `rows` (at least 1), clipped by
// rows_in_bounds when the instruction carries it (an edge tile; may be 0).
inline std::uint32_t tile_rows(const isa::Instr& ins, std::int64_t bx, std::int64_t by, std::int64_t g,
                               const std::int64_t* loops, std::uint32_t depth) {
  const std::uint32_t rows = std::max<std::uint32_t>(1, ins.rows());
  if (!ins.has_rows_in_bounds()) return rows;
  const std::int64_t in = eval_affine(ins.rows_in_bounds(), bx, by, g, loops, depth);
  return static_cast<std::uint32_t>(std::clamp<std::int64_t>(in, 0, rows));
}

// Bytes each row of a memory instruction moves for the block: `row_bytes`, clipped by
// row_bytes_in_bounds when the instruction carries it (an edge tile's columns; may be 0). The
// rows stay at their stride (row_stride, else the unclipped row_bytes).
inline std::uint32_t tile_row_bytes(const isa::Instr& ins, std::int64_t bx, std::int64_t by, std::int64_t g,
                                    const std::int64_t* loops, std::uint32_t depth) {
  if (!ins.has_row_bytes_in_bounds()) return ins.row_bytes();
  const std::int64_t in = eval_affine(ins.row_bytes_in_bounds(), bx, by, g, loops, depth);
  return static_cast<std::uint32_t>(std::clamp<std::int64_t>(in, 0, ins.row_bytes()));
}

// The stride between a memory instruction's rows: row_stride, else (contiguous rows) row_bytes.
inline std::uint64_t row_stride_of(const isa::Instr& ins) { return ins.row_stride() ? ins.row_stride() : ins.row_bytes(); }

std::uint32_t dtype_bytes(isa::DType d);
// Copy-engine ops (a source buffer, the copy engine's issue queue).
bool is_dma(isa::Opcode op);
// Instructions that fill a tile register (Instr.reg) / send one instead of a constant.
bool loads_register(isa::Opcode op);
bool stores_register(isa::Opcode op);
const char* opcode_name(isa::Opcode op);

}  // namespace cais::gpu
