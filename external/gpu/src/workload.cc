#include "cais/gpu/workload.h"

#include <algorithm>

#include "cais/errors.h"

namespace cais::gpu {

std::uint32_t dtype_bytes(isa::DType d) {
  switch (d) {
    case isa::FP32: return 4;
    case isa::FP8: return 1;
    default: return 2;
  }
}

const char* opcode_name(isa::Opcode op) {
  static const std::string* names = [] {
    auto* n = new std::string[64];
    for (int i = 0; i < 64; ++i)
      if (isa::Opcode_IsValid(i)) n[i] = isa::Opcode_Name(static_cast<isa::Opcode>(i));
    return n;
  }();
  return names[static_cast<int>(op) & 63].c_str();
}

namespace {
bool is_remote_op(isa::Opcode op) {
  switch (op) {
    case isa::LD_REMOTE: case isa::ST_REMOTE: case isa::LD_CAIS: case isa::RED_CAIS: case isa::RED_REMOTE:
    case isa::MM_LD_REDUCE: case isa::MM_ST: case isa::MM_RED: case isa::DMA_COPY: case isa::DMA_REDUCE:
    case isa::DMA_PUSH: case isa::DMA_PUSH_REDUCE:
      return true;
    default:
      return false;
  }
}
}  // namespace

bool is_dma(isa::Opcode op) {
  return op == isa::DMA_COPY || op == isa::DMA_REDUCE || op == isa::DMA_PUSH || op == isa::DMA_PUSH_REDUCE;
}

bool loads_register(isa::Opcode op) {
  return op == isa::LD || op == isa::LD_REMOTE || op == isa::LD_CAIS || op == isa::MM_LD_REDUCE;
}

bool stores_register(isa::Opcode op) {
  return op == isa::ST || op == isa::ST_REMOTE || op == isa::RED_CAIS || op == isa::RED_REMOTE || op == isa::MM_ST || op == isa::MM_RED ||
         op == isa::DMA_PUSH || op == isa::DMA_PUSH_REDUCE;
}

namespace {
bool has_buffer(isa::Opcode op) {
  return op != isa::MMA && op != isa::ALU && op != isa::BAR && op != isa::WAIT && op != isa::CAIS_SYNC &&
         op != isa::LOOP && op != isa::ENDLOOP;
}
// Checks one instruction stream of kernel `k` (its program, or warp group `g`) and matches its loops.
void decode_program(const isa::Workload& wl, const isa::Kernel& k, std::size_t gi, const isa::WarpGroup* g,
                    DecodedKernel& dk) {
  DecodedProgram& prog = dk.programs[gi];
  const std::string group = g ? " warp group " + quote(g->name().empty() ? std::to_string(gi) : g->name()) : "";
  auto where = [&](int i) { return "kernel " + quote(k.name()) + group + " instruction " + std::to_string(i); };
  prog.match.assign(prog.ins->size(), 0);
  std::vector<std::uint32_t> stack;
  for (int i = 0; i < prog.ins->size(); ++i) {
    const auto& ins = prog.ins->Get(i);
    if (ins.op() == isa::OP_UNSPECIFIED || !isa::Opcode_IsValid(ins.op()))
      throw ConfigError("workload", where(i) + ": no opcode");
    if (has_buffer(ins.op()) && ins.buffer() >= static_cast<std::uint32_t>(wl.buffers_size()))
      throw ConfigError("workload", where(i) + ": buffer index out of range");
    if (is_dma(ins.op()) && ins.src_buffer() >= static_cast<std::uint32_t>(wl.buffers_size()))
      throw ConfigError("workload", where(i) + ": source buffer index out of range");
    const bool push = ins.op() == isa::DMA_PUSH || ins.op() == isa::DMA_PUSH_REDUCE;
    if (push && wl.buffers(ins.src_buffer()).multicast())
      throw ConfigError("workload", where(i) + ": a dma push reads a local (not multicast) buffer");
    if (push && ins.rows() > 1 && ins.row_stride() && ins.row_stride() != ins.row_bytes())
      throw ConfigError("workload", where(i) + ": dma ops move contiguous ranges (rows x row_bytes with stride == row_bytes)");
    const bool mm = ins.op() == isa::MM_LD_REDUCE || ins.op() == isa::MM_ST || ins.op() == isa::MM_RED;
    if (mm && !wl.buffers(ins.buffer()).multicast())
      throw ConfigError("workload", where(i) + ": multimem needs a multicast buffer");
    if (ins.op() == isa::FLAG_WAIT && ins.scope() == isa::REMOTE)
      throw ConfigError("workload", where(i) + ": flag.wait on remote memory is not supported (signal instead)");
    if (ins.op() == isa::MMA && (ins.m() == 0 || ins.n() == 0 || ins.k() == 0))
      throw ConfigError("workload", where(i) + ": mma needs m, n, k");
    if (ins.has_rows_in_bounds() && (!has_buffer(ins.op()) || ins.op() == isa::FLAG_WAIT || ins.op() == isa::FLAG_SIGNAL))
      throw ConfigError("workload", where(i) + ": rows_in_bounds (in_rows) belongs to a memory op moving a tile");
    if (ins.has_row_bytes_in_bounds() && (!has_buffer(ins.op()) || ins.op() == isa::FLAG_WAIT || ins.op() == isa::FLAG_SIGNAL))
      throw ConfigError("workload", where(i) + ": row_bytes_in_bounds (in_bytes) belongs to a memory op moving a tile");
    if (ins.has_value_of_block() && ins.op() != isa::FLAG_WAIT)
      throw ConfigError("workload", where(i) + ": value_of_block (wait_for) belongs to a flag.wait");
    for (const isa::Affine* a : {&ins.addr(), &ins.src_addr(), &ins.peer(), &ins.rows_in_bounds(), &ins.row_bytes_in_bounds(),
                                  &ins.value_of_block()})
      for (const isa::Quotient& q : a->quotient())
        if (q.divisor() <= 0) throw ConfigError("workload", where(i) + ": quotient term needs divisor > 0");
    if (ins.reg() > kMaxRegisters || ins.src_reg() > kMaxRegisters)
      throw ConfigError("workload", where(i) + ": reg and src_reg are 1.." + std::to_string(kMaxRegisters) + " (0: none)");
    if (ins.reg() && !loads_register(ins.op()) && !stores_register(ins.op()) && ins.op() != isa::ALU)
      throw ConfigError("workload", where(i) + ": " + opcode_name(ins.op()) +
                                        " takes no register (reg is for loads, stores, reductions, pushes and alu)");
    if (ins.read_only() && ins.op() != isa::LD_REMOTE && ins.op() != isa::LD_CAIS)
      throw ConfigError("workload", where(i) + ": read_only (.nc) belongs to a remote load (ld.remote, ld.cais)");
    if (ins.src_reg() && (ins.op() != isa::ALU || !ins.reg()))
      throw ConfigError("workload", where(i) + ": src_reg belongs to an alu with reg (reg += src_reg)");
    if (mm || (is_dma(ins.op()) && wl.buffers(ins.buffer()).multicast())) dk.uses_multicast = true;
    if (ins.op() == isa::CAIS_SYNC && k.cais().enabled() && k.cais().pre_access_sync() && k.cais().num_gpus() > 1)
      dk.uses_group_sync = true;
    if (is_remote_op(ins.op())) dk.uses_remote = true;
    if (ins.op() == isa::MMA) dk.uses_mma = true;
    if (ins.op() == isa::FLAG_SIGNAL && ins.scope() == isa::REMOTE) dk.uses_remote = true;
    if (ins.op() == isa::LOOP) {
      stack.push_back(i);
      dk.max_loop_depth = std::max<std::uint32_t>(dk.max_loop_depth, stack.size());
    } else if (ins.op() == isa::ENDLOOP) {
      if (stack.empty()) throw ConfigError("workload", where(i) + ": endloop without loop");
      prog.match[i] = stack.back();
      prog.match[stack.back()] = i;
      stack.pop_back();
    }
  }
  if (!stack.empty()) throw ConfigError("workload", "kernel " + quote(k.name()) + group + ": loop not closed");
}
}  // namespace

std::shared_ptr<const Workload> Workload::parse(const std::string& bytes, std::uint32_t num_gpus) {
  auto w = std::make_shared<Workload>();
  if (!w->wl_.ParseFromString(bytes)) throw ConfigError("workload", "not a serialized cais.isa.Workload");
  const auto& wl = w->wl_;
  if (wl.launches_size() > 0 && wl.num_gpus() > num_gpus)
    throw ConfigError("workload", "workload " + quote(wl.name()) + " needs " + std::to_string(wl.num_gpus()) +
                                      " GPUs, the system has " + std::to_string(num_gpus));
  std::uint64_t off = 0;
  for (const auto& b : wl.buffers()) {
    DecodedBuffer d;
    d.b = &b;
    d.base = off;
    d.elem_bytes = dtype_bytes(b.dtype());
    off += (b.bytes() + 4095) / 4096 * 4096;
    w->buffers_.push_back(d);
  }
  w->heap_bytes_ = off;
  if (off > kOffsetMask) throw ConfigError("workload", "buffers exceed the 1 TB per-GPU address space");
  for (int ki = 0; ki < wl.kernels_size(); ++ki) {
    const auto& k = wl.kernels(ki);
    DecodedKernel dk;
    dk.k = &k;
    if (k.grid_x() == 0 || k.grid_y() == 0) throw ConfigError("workload", "kernel " + quote(k.name()) + " has an empty grid");
    dk.num_blocks = k.grid_x() * k.grid_y();
    if (k.threads_per_block() == 0) throw ConfigError("workload", "kernel " + quote(k.name()) + " has 0 threads per block");
    if (k.warp_groups_size()) {
      if (k.program_size())
        throw ConfigError("workload", "kernel " + quote(k.name()) + " has both a program and warp groups (one or the other)");
      if (k.warp_groups_size() > 32)
        throw ConfigError("workload", "kernel " + quote(k.name()) + " has " + std::to_string(k.warp_groups_size()) +
                                          " warp groups; a CTA has at most 32 warps");
      if (k.persistent() || k.cluster_ctas() > 1 || k.cais().enabled())
        throw ConfigError("workload", "kernel " + quote(k.name()) +
                                          ": warp groups belong to a plain kernel (not persistent, no clusters, no CAIS groups)");
      for (const auto& g : k.warp_groups()) {
        if (k.loads_via_l1() && g.warps() == 0)
          throw ConfigError("workload", "kernel " + quote(k.name()) + " warp group " + quote(g.name()) +
                                            ": loads_via_l1 needs the group's warps (WarpGroup.warps > 0)");
        dk.programs.push_back({&g.program(), {}, std::max(1u, g.warps())});
      }
      std::uint32_t warps = 0;
      for (const auto& g : k.warp_groups()) warps += g.warps();
      if (warps * 32 > k.threads_per_block())
        throw ConfigError("workload", "kernel " + quote(k.name()) + ": its warp groups have " + std::to_string(warps) +
                                          " warps, more than its " + std::to_string(k.threads_per_block()) + " threads");
    } else {
      dk.programs.push_back({&k.program(), {}, std::max(1u, (k.threads_per_block() + 31) / 32)});
    }
    for (std::size_t gi = 0; gi < dk.programs.size(); ++gi)
      decode_program(wl, k, gi, k.warp_groups_size() ? &k.warp_groups(static_cast<int>(gi)) : nullptr, dk);
    if (k.cais().enabled() && k.cais().pre_launch_sync() && k.cais().num_gpus() > 1) dk.uses_group_sync = true;
    if (dk.max_loop_depth > 8) throw ConfigError("workload", "kernel " + quote(k.name()) + ": loops nest deeper than 8");
    w->kernels_.push_back(std::move(dk));
  }
  for (int li = 0; li < wl.launches_size(); ++li) {
    const auto& la = wl.launches(li);
    const std::string where = "launch " + std::to_string(li);
    if (la.kernel() >= static_cast<std::uint32_t>(wl.kernels_size())) throw ConfigError("workload", where + ": kernel index out of range");
    for (auto a : la.after())
      if (a >= static_cast<std::uint32_t>(li)) throw ConfigError("workload", where + ": 'after' must name an earlier launch");
    for (const auto& d : la.deps()) {
      if (d.producer() >= static_cast<std::uint32_t>(li)) throw ConfigError("workload", where + ": dependency must name an earlier launch");
      if (!d.all_blocks() && d.scale_den() == 0) throw ConfigError("workload", where + ": dependency needs scale_den > 0");
      if (!isa::DepKey_IsValid(d.key())) throw ConfigError("workload", where + ": dependency key must be LINEAR, ROW or COLUMN");
    }
    for (auto g : la.gpus())
      if (g >= wl.num_gpus()) throw ConfigError("workload", where + ": GPU rank out of range");
  }
  return w;
}

}  // namespace cais::gpu
