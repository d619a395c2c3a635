// Block executor: the instruction loop of a resident block, one function per opcode family.
#include "cais/gpu/block_executor.h"

#include <algorithm>

#include "cais/errors.h"
#include "cais/gpu/functional_memory.h"
#include "cais/gpu/l1_staging.h"
#include "cais/gpu/local_memory.h"
#include "cais/gpu/remote_packetizer.h"
#include "cais/gpu/remote_read_cache.h"
#include "cais/gpu/sync_flags.h"
#include "cais/gpu/tile_registers.h"

namespace cais::gpu {

BlockExecutor::BlockExecutor(GpuContext& ctx) : ctx_(ctx) { sms_.resize(ctx.cfg.num_sms); }

std::int64_t BlockExecutor::eval(const Tb& tb, const isa::Affine& a) const {
  return eval_affine(a, tb.bx, tb.by, static_cast<std::int64_t>(ctx_.rank), tb.loops.data(), tb.depth);
}

std::uint32_t BlockExecutor::rows_of(const Tb& tb, const isa::Instr& ins) const {
  return tile_rows(ins, tb.bx, tb.by, static_cast<std::int64_t>(ctx_.rank), tb.loops.data(), tb.depth);
}

std::uint32_t BlockExecutor::row_bytes_of(const Tb& tb, const isa::Instr& ins) const {
  return tile_row_bytes(ins, tb.bx, tb.by, static_cast<std::int64_t>(ctx_.rank), tb.loops.data(), tb.depth);
}

void BlockExecutor::check_extent(const Tb& tb, const LaunchState& L, const isa::Instr& ins, std::uint32_t buffer,
                                 const isa::Affine& addr, const char* what) const {
  const std::uint64_t rows = rows_of(tb, ins), row_bytes = row_bytes_of(tb, ins);
  if (rows == 0 || row_bytes == 0) return;
  const std::int64_t off = eval(tb, addr);
  const std::uint64_t stride = row_stride_of(ins);
  const std::uint64_t size = ctx_.wl.buffers()[buffer].b->bytes();
  const std::uint64_t end = static_cast<std::uint64_t>(off) + (rows - 1) * stride + row_bytes;
  // A strided tile (a GEMM's A, B or C tile) may overhang the matrix's edge: an edge tile of
  // validate_kernels' cuBLAS-plan GEMMs moves its mean in-bounds extent from its own row and
  // column offset (harness/gpu/kernels.py, _tile_rows), so it must start inside; a contiguous
  // range, or a tile clipped to its matrix (in_rows, in_bytes: the library's GEMMs), must fit whole.
  const bool clipped = ins.has_rows_in_bounds() || ins.has_row_bytes_in_bounds();
  if (off >= 0 && (stride > ins.row_bytes() && !clipped ? static_cast<std::uint64_t>(off) < size : end <= size)) return;
  throw InvariantError(ctx_.name() + ": kernel " + quote(L.dk->k->name()) + " pc " + std::to_string(tb.pc) + " block (" +
                       std::to_string(tb.bx) + ", " + std::to_string(tb.by) + "): " + what + isa::Opcode_Name(ins.op()) +
                       " of " + std::to_string(rows) + " x " + std::to_string(row_bytes) + " B at offset " +
                       std::to_string(off) + " reaches byte " + std::to_string(end) + " of buffer " +
                       quote(ctx_.wl.buffers()[buffer].b->name()) + " (" + std::to_string(size) + " B)");
}

void BlockExecutor::wake_at(std::uint32_t tbi, TimePs t) {
  Tb& tb = ctx_.sched->tb(tbi);
  ctx_.schedule(t, kTbStep, tbi, ++tb.seq);
}

void BlockExecutor::on_step_event(std::uint32_t tbi, std::uint32_t seq) {
  Tb& tb = ctx_.sched->tb(tbi);
  if (seq != tb.seq) return;  // superseded by a later wake-up
  if (tb.state == TbState::kWaitMem) tb.state = TbState::kRunning;
  step(tbi);
}

void BlockExecutor::on_start_event(std::uint32_t tbi) {
  Tb& tb = ctx_.sched->tb(tbi);
  tb.state = TbState::kRunning;
  ++tb.seq;
  step(tbi);
}

void BlockExecutor::resume(std::uint32_t tbi) {
  ctx_.sched->tb(tbi).state = TbState::kRunning;
  wake(tbi);
}

void BlockExecutor::add_local(std::uint32_t tbi, TimePs done) {
  Tb& tb = ctx_.sched->tb(tbi);
  mem_satisfied(tb, ~0u);  // prune completed entries
  if (tb.nlocal < tb.local.size()) {
    tb.local[tb.nlocal++] = done;
  } else {  // more in flight than the block tracks: an event of its own
    ++tb.outstanding;
    ++tb.local_overflow;
    ctx_.schedule(done, kLocalDone, tbi);
  }
}

bool BlockExecutor::mem_satisfied(Tb& tb, std::uint32_t limit) {
  const TimePs now = ctx_.now();
  std::uint8_t k = 0;
  for (std::uint8_t i = 0; i < tb.nlocal; ++i)
    if (tb.local[i] > now) tb.local[k++] = tb.local[i];
  tb.nlocal = k;
  return tb.outstanding + tb.nlocal <= limit;
}

// Wake the block when at most `limit` memory ops are in flight: exactly at the right local
// completion when only local ops are pending; otherwise on remote completions (and when the
// local ones are done), re-checking each time.
void BlockExecutor::wait_mem(std::uint32_t tbi, std::uint32_t limit) {
  Tb& tb = ctx_.sched->tb(tbi);
  tb.state = TbState::kWaitMem;
  tb.wait_limit = limit;
  if (tb.nlocal == 0) return;  // remote completions wake it (mem_op_done)
  std::array<TimePs, 16> t = tb.local;
  std::sort(t.begin(), t.begin() + tb.nlocal);
  if (tb.outstanding == 0) {
    wake_at(tbi, t[tb.nlocal - 1 - std::min<std::uint32_t>(limit, tb.nlocal - 1)]);
  } else {
    tb.wait_limit = limit >= tb.nlocal ? limit - tb.nlocal : 0;
    wake_at(tbi, t[tb.nlocal - 1]);
  }
}

// wait_limit of a block parked by WAIT scope=LOCAL: remote completions do not wake it.
constexpr std::uint32_t kLocalOnly = ~0u;

void BlockExecutor::mem_op_done(std::uint32_t tbi) {
  Tb& tb = ctx_.sched->tb(tbi);
  if (tb.outstanding == 0) throw InvariantError(ctx_.name() + ": memory completion without an outstanding op");
  --tb.outstanding;
  if (tb.state == TbState::kWaitMem && tb.wait_limit != kLocalOnly && tb.outstanding <= tb.wait_limit) {
    tb.state = TbState::kRunning;
    wake(tbi);
  }
}

void BlockExecutor::local_overflow_done(std::uint32_t tbi) {
  Tb& tb = ctx_.sched->tb(tbi);
  if (tb.local_overflow == 0) throw InvariantError(ctx_.name() + ": local completion without a local op in flight");
  --tb.local_overflow;
  mem_op_done(tbi);
  if (tb.state == TbState::kWaitMem && tb.wait_limit == kLocalOnly && tb.local_overflow == 0) {
    tb.state = TbState::kRunning;
    wake(tbi);  // re-checks the wait
  }
}

void BlockExecutor::remote_load_done(std::uint32_t tbi) {
  Tb& tb = ctx_.sched->tb(tbi);
  if (tb.remote_loads == 0) throw InvariantError(ctx_.name() + ": remote load completion without a remote load in flight");
  --tb.remote_loads;
  if (tb.state == TbState::kWaitMem && tb.wait_limit == kLocalOnly && tb.remote_loads == 0) {
    tb.state = TbState::kRunning;
    wake(tbi);  // re-checks the wait
  }
}

bool BlockExecutor::local_done_or_park(std::uint32_t tbi) {
  Tb& tb = ctx_.sched->tb(tbi);
  mem_satisfied(tb, ~0u);  // prune completed local ops
  if (tb.nlocal == 0 && tb.local_overflow == 0 && tb.remote_loads == 0) return true;
  tb.state = TbState::kWaitMem;
  tb.wait_limit = kLocalOnly;
  if (tb.nlocal) wake_at(tbi, *std::max_element(tb.local.begin(), tb.local.begin() + tb.nlocal));
  return false;  // re-evaluated on wake-up (the last tracked time, the last overflow op or remote load)
}

void BlockExecutor::step(std::uint32_t tbi) {
  Tb& tb = ctx_.sched->tb(tbi);
  if (tb.state != TbState::kRunning) return;  // a stale wake-up
  const LaunchState& L = ctx_.sched->launch(tb.launch);
  const auto& prog = *L.dk->programs[tb.role].ins;
  const auto n = static_cast<std::uint32_t>(prog.size());
  for (;;) {
    if (tb.wait0) {
      if (!mem_satisfied(tb, 0)) return wait_mem(tbi, 0);
      tb.wait0 = false;
    }
    if (tb.pc >= n) return finish(tbi);
    const isa::Instr& ins = prog.Get(static_cast<int>(tb.pc));
    bool go_on = true;
    switch (ins.op()) {
      case isa::LOOP:
      case isa::ENDLOOP: go_on = exec_control(tb, L, ins); break;
      case isa::MMA:
      case isa::ALU: go_on = exec_compute(tbi, ins); break;
      case isa::LD:
      case isa::ST:
      case isa::LD_REMOTE:
      case isa::ST_REMOTE:
      case isa::LD_CAIS:
      case isa::RED_CAIS:
      case isa::RED_REMOTE:
      case isa::MM_LD_REDUCE:
      case isa::MM_ST:
      case isa::MM_RED:
      case isa::DMA_COPY:
      case isa::DMA_REDUCE:
      case isa::DMA_PUSH:
      case isa::DMA_PUSH_REDUCE: go_on = exec_memory(tbi, ins); break;
      case isa::WAIT:
      case isa::BAR: go_on = exec_wait(tbi, ins); break;
      case isa::FLAG_WAIT: go_on = exec_flag_wait(tbi, ins); break;
      case isa::FLAG_SIGNAL: go_on = exec_flag_signal(tbi, ins); break;
      case isa::CAIS_SYNC: go_on = exec_cais_sync(tbi); break;
      default:
        throw InvariantError(ctx_.name() + ": unsupported opcode " + opcode_name(ins.op()));
    }
    if (!go_on) return;
  }
}

// A block retires when its memory ops are done.
void BlockExecutor::finish(std::uint32_t tbi) {
  Tb& tb = ctx_.sched->tb(tbi);
  if (!mem_satisfied(tb, 0)) return wait_mem(tbi, 0);
  ctx_.sched->retire(tbi);
}

bool BlockExecutor::exec_control(Tb& tb, const LaunchState& L, const isa::Instr& ins) {
  if (ins.op() == isa::LOOP) {
    if (ins.count() == 0) {
      tb.pc = L.dk->programs[tb.role].match[tb.pc] + 1;
    } else {
      tb.loops[tb.depth++] = 0;
      ++tb.pc;
    }
    return true;
  }
  const DecodedProgram& prog = L.dk->programs[tb.role];
  const std::uint32_t head = prog.match[tb.pc];
  if (++tb.loops[tb.depth - 1] < prog.ins->Get(static_cast<int>(head)).count()) {
    tb.pc = head + 1;
  } else {
    --tb.depth;
    ++tb.pc;
  }
  return true;
}

// mma on the SM's tensor cores, alu on its vector units: each a server of its own per SM.
bool BlockExecutor::exec_compute(std::uint32_t tbi, const isa::Instr& ins) {
  Tb& tb = ctx_.sched->tb(tbi);
  const HopperConfig& cfg = ctx_.cfg;
  SmUnits& sm = sms_[tb.sm];
  if (ins.op() == isa::MMA) {
    double rate = cfg.tc_flops_per_cycle * cfg.tc_efficiency * ctx_.clock_ghz / 1000.0;  // FLOP/ps
    if (ins.dtype() == isa::FP8) rate *= 2;
    if (ins.dtype() == isa::FP32) rate *= 0.5;
    const double flops = 2.0 * ins.m() * ins.n() * ins.k();
    mma_flops_ += static_cast<std::uint64_t>(flops);
    const TimePs start = std::max(ctx_.now(), sm.tc_busy);
    sm.tc_busy = start + static_cast<TimePs>(flops / rate * tb.jitter + 0.5);
    ++tb.pc;
    wake_at(tbi, sm.tc_busy);
    return false;
  }
  if (ctx_.functional && ins.reg()) ctx_.regs->add(tbi, ins.reg(), ins.src_reg(), tb.pc);
  const double flops = static_cast<double>(ins.elements()) * ins.flops_per_element();
  alu_flops_ += static_cast<std::uint64_t>(flops);
  const TimePs start = std::max(ctx_.now(), sm.alu_busy);
  sm.alu_busy = start + static_cast<TimePs>(flops / (cfg.alu_flops_per_cycle * cfg.alu_efficiency * ctx_.clock_ghz / 1000.0) * tb.jitter + 0.5);
  ++tb.pc;
  wake_at(tbi, sm.alu_busy);
  return false;
}

bool BlockExecutor::exec_memory(std::uint32_t tbi, const isa::Instr& ins) {
  Tb& tb = ctx_.sched->tb(tbi);
  const LaunchState& L = ctx_.sched->launch(tb.launch);
  // A push to a multicast buffer goes to the NVLS group like a multimem store.
  const bool mc_push = (ins.op() == isa::DMA_PUSH || ins.op() == isa::DMA_PUSH_REDUCE) &&
                       ctx_.wl.buffers()[ins.buffer()].b->multicast();
  const bool unicast_remote = ins.op() == isa::LD_REMOTE || ins.op() == isa::ST_REMOTE || ins.op() == isa::LD_CAIS ||
                              ins.op() == isa::RED_CAIS || ins.op() == isa::RED_REMOTE || (is_dma(ins.op()) && !mc_push);
  const bool multimem = ins.op() == isa::MM_LD_REDUCE || ins.op() == isa::MM_ST || ins.op() == isa::MM_RED || mc_push;
  check_extent(tb, L, ins, ins.buffer(), ins.addr(), "");
  if (is_dma(ins.op())) check_extent(tb, L, ins, ins.src_buffer(), ins.src_addr(), "source of a ");
  const auto peer = unicast_remote ? static_cast<std::uint32_t>(eval(tb, ins.peer())) : ctx_.rank;
  if (unicast_remote && peer >= ctx_.wl.proto().num_gpus())
    throw InvariantError(ctx_.name() + ": kernel " + quote(L.dk->k->name()) + " pc " + std::to_string(tb.pc) + " peer " +
                         std::to_string(peer) + " out of range");
  if (multimem || (unicast_remote && peer != ctx_.rank)) {
    if (L.dk->k->loads_via_l1() && sm_store(ins.op()))
      note_store(tb, static_cast<std::uint64_t>(rows_of(tb, ins)) * row_bytes_of(tb, ins));
    if (!(ctx_.cfg.cache_remote_reads && cached_remote_read(tbi, ins, peer)))
      ctx_.remote->issue(tbi, ins, is_dma(ins.op()) ? ctx_.cfg.num_sms : tb.sm);
  } else {
    exec_local_memory(tbi, ins);  // also a .cais / remote op whose owner is this GPU
  }
  ++tb.pc;
  if (!ins.is_async()) tb.wait0 = true;  // checked at the top of the instruction loop
  return true;
}

// A remote read-only tile load through the remote read cache: served from L2, joined to the
// fetch in flight, or fetched (with its key, so the fetch fills the cache). False: not such a
// load (stores, reductions, multimem, DMA; or an edge tile with nothing to move).
bool BlockExecutor::cached_remote_read(std::uint32_t tbi, const isa::Instr& ins, std::uint32_t peer) {
  if (ins.op() != isa::LD_CAIS && !(ins.op() == isa::LD_REMOTE && ins.read_only())) return false;
  Tb& tb = ctx_.sched->tb(tbi);
  const std::uint32_t rows = rows_of(tb, ins), row_bytes = row_bytes_of(tb, ins);
  const std::uint64_t bytes = static_cast<std::uint64_t>(rows) * row_bytes;
  if (bytes == 0) return false;
  const std::uint64_t off = static_cast<std::uint64_t>(eval(tb, ins.addr()));
  const std::uint64_t key =
      mix64(mix64(mix64((static_cast<std::uint64_t>(tb.launch) << 40) ^ (static_cast<std::uint64_t>(peer) << 32) ^ ins.buffer()) ^
                  off) ^
            (static_cast<std::uint64_t>(rows) << 40) ^ (static_cast<std::uint64_t>(row_bytes) << 8) ^ ins.row_stride());
  const std::uint32_t reg = ctx_.functional ? ins.reg() : 0;
  const std::size_t elements = bytes / ctx_.wl.buffers()[ins.buffer()].elem_bytes;
  TimePs done = 0;
  switch (ctx_.rcache->lookup(key, bytes, tbi, reg, tb.pc, elements, done)) {
    case RemoteReadCache::Outcome::kHit: add_local(tbi, done); break;
    case RemoteReadCache::Outcome::kJoined: ctx_.remote->joined(key); break;
    case RemoteReadCache::Outcome::kFetch: ctx_.remote->issue(tbi, ins, tb.sm, key); break;
  }
  return true;
}

void BlockExecutor::exec_local_memory(std::uint32_t tbi, const isa::Instr& ins) {
  Tb& tb = ctx_.sched->tb(tbi);
  const std::uint64_t off = static_cast<std::uint64_t>(eval(tb, ins.addr()));
  const std::uint32_t rows = rows_of(tb, ins), row_bytes = row_bytes_of(tb, ins);
  if (rows == 0 || row_bytes == 0) {  // an edge tile wholly out of bounds: nothing to move
    add_local(tbi, ctx_.now());
    return;
  }
  const std::uint64_t bytes = static_cast<std::uint64_t>(rows) * row_bytes;
  const std::uint64_t stride = row_stride_of(ins);
  const bool dma = is_dma(ins.op());
  const bool accumulate = ins.op() == isa::DMA_REDUCE || ins.op() == isa::DMA_PUSH_REDUCE;
  const bool reduction = ins.op() == isa::RED_CAIS || ins.op() == isa::RED_REMOTE;
  const bool write = ins.op() == isa::ST || ins.op() == isa::ST_REMOTE || reduction || dma;
  const std::uint64_t key = mix64(mix64((static_cast<std::uint64_t>(ins.buffer()) << 32) ^ off) ^
                                  (static_cast<std::uint64_t>(rows) << 40) ^ (static_cast<std::uint64_t>(row_bytes) << 8) ^
                                  ins.row_stride());
  LocalMemory& mem = *ctx_.mem;
  TimePs first = 0;
  TimePs t = mem.access(ctx_.now(), tb.sm, key, bytes, write, &first);
  const DecodedKernel& dk = *ctx_.sched->launch(tb.launch).dk;
  if (ins.op() == isa::LD && dk.k->loads_via_l1()) {
    t = std::max(t, round_end(tb, first, bytes, dk.programs[tb.role].warps));
    t = ctx_.l1->admit(tb.sm, ctx_.now(), bytes, t);
  } else if (write && !dma && dk.k->loads_via_l1()) {  // the copy engine's bytes do not cross the SM's port
    note_store(tb, bytes);
  }
  const auto elements = [&] { return bytes / ctx_.wl.buffers()[ins.buffer()].elem_bytes; };  // of a register tile
  if (dma) {  // local copy: read the source too
    const std::uint64_t soff = static_cast<std::uint64_t>(eval(tb, ins.src_addr()));
    t = std::max(t, mem.access(ctx_.now(), tb.sm, mix64(soff ^ (static_cast<std::uint64_t>(ins.src_buffer()) << 32)), bytes, false));
    if (ctx_.functional && ins.reg())  // a push of a register (dma.copy/reduce take none)
      ctx_.fmem->write_tile(ins.buffer(), off, rows, row_bytes, stride,
                            ctx_.regs->read(tbi, ins.reg(), elements(), tb.pc), accumulate);
    else if (ctx_.functional)
      ctx_.fmem->copy_rows(ins.src_buffer(), soff, ins.buffer(), off, rows, row_bytes, stride, accumulate);
  } else if (ctx_.functional) {
    const bool add = reduction;
    const double v = ins.value() ? static_cast<double>(ins.value()) : static_cast<double>(ctx_.rank + 1);
    if (write && ins.reg())
      ctx_.fmem->write_tile(ins.buffer(), off, rows, row_bytes, stride,
                            ctx_.regs->read(tbi, ins.reg(), elements(), tb.pc), add);
    else if (write)
      ctx_.fmem->fill(ins.buffer(), off, rows, row_bytes, stride, v, add);
    else
      ctx_.fmem->load(ins.buffer(), off, rows, row_bytes, stride);
    if (!write && ins.reg())  // the values are read now; the register is ready when the load completes
      ctx_.fmem->read_tile(ins.buffer(), off, rows, row_bytes, stride,
                           ctx_.regs->begin_load(tbi, ins.reg(), elements(), tb.pc, false, t));
  }
  mem.count_tile(write, bytes);
  add_local(tbi, t);
}

TimePs BlockExecutor::round_end(Tb& tb, TimePs first, std::uint64_t bytes, std::uint32_t warps) {
  if (!tb.round_open) {
    tb.round_open = true;
    tb.round_start = ctx_.now();
    tb.round_first = first;
    tb.round_loaded = 0;
    tb.round_stored = tb.stored_since;
    tb.stored_since = 0;
  }
  tb.round_loaded += bytes;
  tb.round_first = std::max(tb.round_first, first);
  return ctx_.mem->warp_round_end(tb.round_start, tb.round_first, tb.round_loaded, tb.round_stored, warps);
}

bool BlockExecutor::exec_wait(std::uint32_t tbi, const isa::Instr& ins) {
  Tb& tb = ctx_.sched->tb(tbi);
  if (ins.op() == isa::WAIT && ins.scope() == isa::LOCAL) {
    if (!local_done_or_park(tbi)) return false;
    ++tb.pc;
    return true;
  }
  const std::uint32_t limit = ins.op() == isa::WAIT ? ins.count() : 0;
  if (!mem_satisfied(tb, limit)) {
    wait_mem(tbi, limit);  // re-evaluated on wake-up
    return false;
  }
  ++tb.pc;
  return true;
}

bool BlockExecutor::exec_flag_wait(std::uint32_t tbi, const isa::Instr& ins) {
  Tb& tb = ctx_.sched->tb(tbi);
  const std::uint64_t key = ctx_.wl.buffers()[ins.buffer()].base + static_cast<std::uint64_t>(eval(tb, ins.addr()));
  const std::int64_t threshold = ins.has_value_of_block() ? eval(tb, ins.value_of_block()) : ins.value();
  if (ctx_.flags->reached(key, threshold)) {
    if (tb.wait_since) flag_wait_ns_.add(static_cast<double>(ctx_.now() - tb.wait_since) / 1000.0);
    tb.wait_since = 0;
    ++tb.pc;
    return true;
  }
  if (!tb.wait_since) tb.wait_since = std::max<TimePs>(1, ctx_.now());
  tb.state = TbState::kWaitFlag;
  ctx_.flags->park(key, tbi);
  return false;
}

bool BlockExecutor::exec_flag_signal(std::uint32_t tbi, const isa::Instr& ins) {
  Tb& tb = ctx_.sched->tb(tbi);
  const auto peer = ins.scope() == isa::REMOTE ? static_cast<std::uint32_t>(eval(tb, ins.peer())) : ctx_.rank;
  if (peer != ctx_.rank) {
    ctx_.remote->issue(tbi, ins, tb.sm);
  } else {
    ctx_.flags->add(ctx_.wl.buffers()[ins.buffer()].base + static_cast<std::uint64_t>(eval(tb, ins.addr())), ins.value());
  }
  ++tb.pc;
  return true;
}

bool BlockExecutor::exec_cais_sync(std::uint32_t tbi) {
  Tb& tb = ctx_.sched->tb(tbi);
  const LaunchState& L = ctx_.sched->launch(tb.launch);
  ++tb.pc;
  const auto& c = L.dk->k->cais();
  if (!c.enabled() || !c.pre_access_sync() || L.participants <= 1 || !ctx_.has_ports) return true;
  tb.state = TbState::kWaitSync;
  tb.wait_since = ctx_.now();
  ctx_.sync->wait_tb(tb.group, tbi);
  ctx_.sync->request(tb.group, L.participants);
  return false;
}

}  // namespace cais::gpu
