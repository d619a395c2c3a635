// Functional memory of a Hopper GPU (functional workloads only): one fp64 value per element of
// every buffer, so tests can check what loads, stores, reductions and copies computed.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "cais/gpu/workload.h"
#include "cais/packet.h"

namespace cais::gpu {

class FunctionalMemory {
 public:
  // rank: the GPU's; a buffer with init_rank starts as rank + 1 in every element.
  FunctionalMemory(const Workload& wl, bool enabled, std::string owner, std::uint32_t rank);
  // Store (or add) `values` at the global address `addr` (this GPU's part of it).
  void apply_store(std::uint64_t addr, const std::vector<double>& values, bool accumulate);
  // The values of `bytes` at `addr`.
  void read_values(std::uint64_t addr, std::uint32_t bytes, std::vector<double>& out) const;
  // The same for every line of packet `p` (bulk packets: `bytes` / p.lines at each line
  // address), values line after line; apply_lines stores p.values so.
  void read_lines(const Packet& p, std::uint32_t bytes, std::vector<double>& out) const;
  void apply_lines(const Packet& p, bool accumulate);
  // A tile of `rows` x `row_bytes` at `off` (row stride `stride`, 0 = contiguous) set to (or
  // increased by) `value`.
  void fill(std::uint32_t buffer, std::uint64_t off, std::uint32_t rows, std::uint32_t row_bytes,
            std::uint64_t stride, double value, bool accumulate);
  // A tile loaded by a block: its values are added to ld_value_sum.
  void load(std::uint32_t buffer, std::uint64_t off, std::uint32_t rows, std::uint32_t row_bytes, std::uint64_t stride);
  // Local copy engine: rows of `src` copied (or added) to `dst`, both at the same row stride.
  void copy_rows(std::uint32_t src_buffer, std::uint64_t src_off, std::uint32_t dst_buffer, std::uint64_t dst_off,
                 std::uint32_t rows, std::uint32_t row_bytes, std::uint64_t stride, bool accumulate);
  void add_loaded(const std::vector<double>& values) {
    for (double v : values) ld_value_sum_ += v;
  }
  // Tile registers (isa.proto Instr.reg): a tile's values read out row-major into `out`, or
  // `values` (row-major) stored into (or added to) the tile.
  void read_tile(std::uint32_t buffer, std::uint64_t off, std::uint32_t rows, std::uint32_t row_bytes,
                 std::uint64_t stride, std::vector<double>& out) const;
  void write_tile(std::uint32_t buffer, std::uint64_t off, std::uint32_t rows, std::uint32_t row_bytes,
                  std::uint64_t stride, const std::vector<double>& values, bool accumulate);
  double value(std::uint32_t buffer, std::uint64_t elem) const;
  void set_value(std::uint32_t buffer, std::uint64_t elem, double v);

  // A buffer's contents in four numbers (statistics gpuN.mem.<buffer>.*). hash: the sum over
  // elements i of mix(bits(v_i) + K * (i + 1)) mod 2^64, shifted right by 12 (exact in a
  // double); bits() is the IEEE-754 binary64 pattern with -0 as +0, mix the splitmix64
  // finaliser, K = 0x9e3779b97f4a7c15. harness/gpu/functional.py computes the same in numpy.
  struct Summary {
    double sum = 0, min = 0, max = 0, hash = 0;
  };
  Summary summary(std::uint32_t buffer) const;
  double ld_value_sum() const { return ld_value_sum_; }

 private:
  std::uint32_t buffer_of(std::uint64_t heap_off) const;
  [[noreturn]] void out_of_range(std::uint32_t buffer, const char* what) const;

  const Workload& wl_;
  bool enabled_;
  std::string owner_;
  std::vector<std::vector<double>> mem_;
  double ld_value_sum_ = 0;
};

}  // namespace cais::gpu
