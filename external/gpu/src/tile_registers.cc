// Tile registers: values per block slot, with the readiness rules of isa.proto Instr.reg.
#include "cais/gpu/tile_registers.h"

#include "cais/errors.h"
#include "cais/gpu/tb_scheduler.h"

namespace cais::gpu {

std::array<TileRegister, kMaxRegisters>& TileRegisters::slot(std::uint32_t tbi) {
  if (tbi >= regs_.size()) regs_.resize(tbi + 1);
  return regs_[tbi];
}

void TileRegisters::fail(std::uint32_t tbi, std::uint32_t pc, const std::string& what) const {
  const Tb& tb = ctx_.sched->tb(tbi);
  throw InvariantError(ctx_.name() + ": kernel " + quote(ctx_.sched->launch(tb.launch).dk->k->name()) + " pc " +
                       std::to_string(pc) + ": " + what);
}

void TileRegisters::check_ready(std::uint32_t tbi, std::uint32_t r, std::uint32_t pc, const char* what) {
  const TileRegister& reg = slot(tbi)[r - 1];
  if (reg.remote_loads > 0 || reg.ready_ps > ctx_.now())
    fail(tbi, pc, std::string(what) + " register " + std::to_string(r) + " before its load (pc " +
                      std::to_string(reg.load_pc) + ") completed: a WAIT or BAR must cover the load");
}

std::vector<double>& TileRegisters::begin_load(std::uint32_t tbi, std::uint32_t r, std::size_t elements,
                                               std::uint32_t pc, bool remote, TimePs ready_ps) {
  check_ready(tbi, r, pc, "loads into");
  TileRegister& reg = slot(tbi)[r - 1];
  reg.values.assign(elements, 0.0);
  reg.remote_loads = remote ? 1 : 0;
  reg.ready_ps = remote ? 0 : ready_ps;
  reg.load_pc = pc;
  return reg.values;
}

void TileRegisters::remote_load_done(std::uint32_t tbi, std::uint32_t r) {
  TileRegister& reg = slot(tbi)[r - 1];
  if (reg.remote_loads == 0) throw InvariantError(ctx_.name() + ": a remote load completed into a register not loading");
  --reg.remote_loads;
}

const std::vector<double>& TileRegisters::read(std::uint32_t tbi, std::uint32_t r, std::size_t elements,
                                               std::uint32_t pc) {
  check_ready(tbi, r, pc, "reads");
  const TileRegister& reg = slot(tbi)[r - 1];
  if (reg.values.size() != elements)
    fail(tbi, pc, "register " + std::to_string(r) + " holds " + std::to_string(reg.values.size()) +
                      " values, the tile has " + std::to_string(elements) + " elements");
  return reg.values;
}

void TileRegisters::add(std::uint32_t tbi, std::uint32_t r, std::uint32_t s, std::uint32_t pc) {
  check_ready(tbi, r, pc, "alu reads");
  if (s == 0) return;
  check_ready(tbi, s, pc, "alu reads");
  auto& regs = slot(tbi);
  std::vector<double>& dst = regs[r - 1].values;
  const std::vector<double>& src = regs[s - 1].values;
  if (dst.size() != src.size())
    fail(tbi, pc, "alu adds register " + std::to_string(s) + " (" + std::to_string(src.size()) + " values) into register " +
                      std::to_string(r) + " (" + std::to_string(dst.size()) + " values)");
  for (std::size_t i = 0; i < dst.size(); ++i) dst[i] += src[i];
}

}  // namespace cais::gpu
