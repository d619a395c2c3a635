// Tile registers of a Hopper GPU's thread blocks (functional workloads only, isa.proto
// Instr.reg): each block slot has kMaxRegisters registers, each holding the values of one tile
// (row-major). Loads fill them, stores and reductions send them, ALU adds one into another.
// The file also enforces the program order a real kernel needs: a register is read or
// reloaded only once the load that fills it has completed (a WAIT or BAR covers it).
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "cais/gpu/gpu_context.h"

namespace cais::gpu {

struct TileRegister {
  std::vector<double> values;
  std::uint32_t remote_loads = 0;  // remote loads into it still in flight (0 or 1)
  TimePs ready_ps = 0;             // completion time of the last local load into it
  std::uint32_t load_pc = 0;       // pc of the last load into it (error messages)
};

class TileRegisters {
 public:
  explicit TileRegisters(GpuContext& ctx) : ctx_(ctx) {}
  // A load into register `r` of block `tbi` (instruction at `pc`): the register, sized to
  // `elements` and zeroed, for the caller to fill. `remote`: it stays pending until
  // remote_load_done; otherwise it is ready at `ready_ps`.
  std::vector<double>& begin_load(std::uint32_t tbi, std::uint32_t r, std::size_t elements, std::uint32_t pc,
                                  bool remote, TimePs ready_ps);
  void remote_load_done(std::uint32_t tbi, std::uint32_t r);
  // The values of register `r`, read by the instruction at `pc` that needs `elements` of them.
  const std::vector<double>& read(std::uint32_t tbi, std::uint32_t r, std::size_t elements, std::uint32_t pc);
  // ALU at `pc`: r += s elementwise (s = 0: r keeps its values, but must be ready).
  void add(std::uint32_t tbi, std::uint32_t r, std::uint32_t s, std::uint32_t pc);
  // Register `r` of block `tbi` (for placing remote load responses).
  std::vector<double>& values(std::uint32_t tbi, std::uint32_t r) { return slot(tbi)[r - 1].values; }

 private:
  std::array<TileRegister, kMaxRegisters>& slot(std::uint32_t tbi);
  void check_ready(std::uint32_t tbi, std::uint32_t r, std::uint32_t pc, const char* what);
  [[noreturn]] void fail(std::uint32_t tbi, std::uint32_t pc, const std::string& what) const;

  GpuContext& ctx_;
  std::vector<std::array<TileRegister, kMaxRegisters>> regs_;  // per block slot
};

}  // namespace cais::gpu
