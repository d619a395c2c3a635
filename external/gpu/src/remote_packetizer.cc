#include "cais/gpu/remote_packetizer.h"

#include <algorithm>

#include "cais/dma.h"
#include "cais/errors.h"
#include "cais/gpu/block_executor.h"
#include "cais/gpu/functional_memory.h"
#include "cais/gpu/local_memory.h"
#include "cais/gpu/nvlink_ports.h"
#include "cais/gpu/remote_read_cache.h"
#include "cais/gpu/tb_scheduler.h"
#include "cais/gpu/tile_registers.h"

namespace cais::gpu {

RemotePacketizer::RemotePacketizer(GpuContext& ctx) : ctx_(ctx) {
  queues_.resize(ctx.cfg.num_sms + 1);
  cap_waiting_.assign(queues_.size(), 0);
  sm_port_free_at_.assign(ctx.cfg.num_sms, 0);
  sm_port_wake_at_.assign(ctx.cfg.num_sms, 0);
}

void RemotePacketizer::issue(std::uint32_t tbi, const isa::Instr& ins, std::uint32_t queue, std::uint64_t fill_key) {
  Tb& tb = ctx_.sched->tb(tbi);
  const LaunchState& L = ctx_.sched->launch(tb.launch);
  const auto& bufs = ctx_.wl.buffers();
  std::uint32_t oi;
  if (free_ops_.empty()) {
    oi = static_cast<std::uint32_t>(ops_.size());
    ops_.emplace_back();
  } else {
    oi = free_ops_.back();
    free_ops_.pop_back();
  }
  RemoteOp& op = ops_[oi];
  std::vector<double> keep = std::move(op.data);  // a register store's buffer keeps its capacity
  std::vector<BulkLines> keep_bulk = std::move(op.bulk);
  op = RemoteOp{};
  op.data = std::move(keep);
  op.bulk = std::move(keep_bulk);
  op.in_use = true;
  op.tb = tbi;
  op.queue = queue;
  op.fill_key = fill_key;
  op.op = ins.op();
  op.group = tb.group;
  op.row_bytes = tile_row_bytes(ins, tb.bx, tb.by, ctx_.rank, tb.loops.data(), tb.depth);
  op.row_stride = row_stride_of(ins);
  op.buffer = ins.buffer();
  op.elem_bytes = bufs[ins.buffer()].elem_bytes;
  op.value = ins.value() ? static_cast<double>(ins.value()) : static_cast<double>(ctx_.rank + 1);
  const auto ev = [&](const isa::Affine& a) { return eval_affine(a, tb.bx, tb.by, ctx_.rank, tb.loops.data(), tb.depth); };
  op.rows = tile_rows(ins, tb.bx, tb.by, ctx_.rank, tb.loops.data(), tb.depth);
  const std::uint64_t off = bufs[ins.buffer()].base + static_cast<std::uint64_t>(ev(ins.addr()));
  op.peer = static_cast<std::uint32_t>(ev(ins.peer()));
  switch (ins.op()) {
    case isa::LD_REMOTE: op.type = proto::PKT_READ_REQ; break;
    case isa::ST_REMOTE: op.type = proto::PKT_WRITE; break;
    case isa::LD_CAIS: op.type = proto::PKT_CAIS_LD_REQ; op.aux = ctx_.sched->participants_excluding(L, op.peer); break;
    case isa::RED_CAIS: op.type = proto::PKT_CAIS_RED; op.aux = ctx_.sched->participants_excluding(L, op.peer); break;
    // a plain red.global.add: one contribution, complete on its own, so no merge unit holds it
    case isa::RED_REMOTE: op.type = proto::PKT_CAIS_RED; op.aux = 1; break;
    case isa::MM_LD_REDUCE: op.type = proto::PKT_MM_LD_REDUCE_REQ; break;
    case isa::MM_ST: op.type = proto::PKT_MM_ST; break;
    case isa::MM_RED: op.type = proto::PKT_MM_RED; break;
    case isa::DMA_COPY:
    case isa::DMA_REDUCE: {  // a pull: read requests to the peer, the data lands here
      op.type = proto::PKT_READ_REQ;
      if (ins.rows() > 1 && ins.row_stride() && ins.row_stride() != ins.row_bytes())
        throw ConfigError("workload", "dma ops move contiguous ranges (rows x row_bytes with stride == row_bytes)");
      op.local_off = off;
      op.addr = unicast_addr(op.peer, bufs[ins.src_buffer()].base + static_cast<std::uint64_t>(ev(ins.src_addr())));
      op.elem_bytes = bufs[ins.src_buffer()].elem_bytes;
      break;
    }
    case isa::DMA_PUSH:
    case isa::DMA_PUSH_REDUCE: {  // a push: the local source goes out as PKT_DMA writes
      const bool reduce = ins.op() == isa::DMA_PUSH_REDUCE;
      op.type = proto::PKT_DMA;
      op.local_off = bufs[ins.src_buffer()].base + static_cast<std::uint64_t>(ev(ins.src_addr()));
      op.elem_bytes = bufs[ins.src_buffer()].elem_bytes;
      if (bufs[ins.buffer()].b->multicast()) {  // to every member of the NVLS group, via the switch
        op.addr = kMulticastBit | off;
        op.peer = 0;
        op.aux = dma_aux(reduce ? DmaOp::kMulticastReduce : DmaOp::kMulticastStore, ctx_.wl.proto().num_gpus());
      } else {  // a reduce-write adds at the destination (cais/dma.h)
        op.addr = unicast_addr(op.peer, off);
        op.aux = dma_aux(reduce ? DmaOp::kReduceCopy : DmaOp::kUnicast, 1);
      }
      break;
    }
    case isa::FLAG_SIGNAL:
      op.type = proto::PKT_WRITE;
      op.flag = true;
      op.rows = 1;
      op.row_bytes = 8;
      op.value = static_cast<double>(ins.value());
      break;
    default: throw InvariantError("issue_remote: not a remote op");
  }
  const bool mm = op.type == proto::PKT_MM_LD_REDUCE_REQ || op.type == proto::PKT_MM_ST || op.type == proto::PKT_MM_RED;
  if (mm) {
    op.addr = kMulticastBit | off;
    op.peer = 0;
    op.aux = ctx_.wl.proto().num_gpus();
  } else if (!is_dma(ins.op())) {
    op.addr = unicast_addr(op.peer, off);
  }
  if (op.row_bytes == 0 || op.rows == 0) {  // nothing to move (an edge tile wholly out of bounds)
    free_ops_.push_back(oi);
    op.in_use = false;
    ++tb.outstanding;
    ctx_.schedule(ctx_.now(), kMemDone, tbi);
    return;
  }
  if (ctx_.functional && ins.reg()) {
    op.reg = ins.reg();
    op.pc = tb.pc;
    if (is_dma(ins.op())) op.elem_bytes = bufs[ins.buffer()].elem_bytes;  // a push sends the register, not its source
    bind_register(op, tb);
  }
  if (sends_sm_data(op)) op.port_total = static_cast<std::uint64_t>(op.rows) * op.row_bytes;
  ++live_;
  ++tb.outstanding;
  if (loads_register(ins.op())) ++tb.remote_loads;
  // An SM's queue: one stream per block (its warps); the copy engine serves its ops in order.
  queues_[queue].push(oi, queue == ctx_.cfg.num_sms ? 0 : tbi);
  pump(queue);
}

// One packet of `lines` lines of `line_bytes` each at addrs[0..lines) (lines > 1: bulk).
void RemotePacketizer::emit(RemoteOp& op, std::uint32_t oi, const std::uint64_t* addrs, std::uint32_t lines,
                            std::uint32_t line_bytes) {
  Sim& sim = ctx_.sim;
  const PacketHandle h = sim.new_packet(ctx_.self);
  Packet& p = sim.packets()[h];
  const std::uint64_t addr = addrs[0];
  const std::uint32_t bytes = line_bytes * lines;
  p.type = op.type;
  p.src = ctx_.node;
  p.origin = ctx_.node;
  p.dst = op.peer;
  p.addr = op.flag ? op.addr : addr;  // a flag is an 8 B word: keep its exact address, not its sector's
  p.lines = lines;
  for (std::uint32_t i = 1; i < lines; ++i) p.more_lines[i - 1] = addrs[i];
  p.group = op.group;
  // tag: op index (low 32 bits) | packet sequence (bits 32..60; unique per request in flight,
  // as switches key multicast completions by (src, tag)) | posted-store bit 61 | flag-write bit 62.
  p.tag = oi | ((++tag_seq_ & ((1ull << 29) - 1)) << 32) | (op.flag ? kFlagTag : 0) |
          (posted_store(op) ? kPostedStoreTag : 0);
  p.inject_ps = sim.now();
  p.aux = op.aux;
  std::uint32_t cls = kReq;
  switch (op.type) {
    case proto::PKT_READ_REQ: p.aux = bytes; break;
    case proto::PKT_CAIS_LD_REQ:
    case proto::PKT_MM_LD_REDUCE_REQ: p.count = bytes; break;
    case proto::PKT_WRITE:
      p.payload_bytes = op.flag ? 8 : bytes;
      if (op.flag) p.count = static_cast<std::uint32_t>(op.value);
      cls = kPost;
      break;
    case proto::PKT_MM_ST:
    case proto::PKT_MM_RED:
      p.payload_bytes = bytes;
      p.count = 0;
      cls = kPost;
      break;
    case proto::PKT_DMA: {  // the copy engine reads its source (L2/HBM) and writes it out
      p.payload_bytes = bytes;
      cls = kPost;
      ctx_.mem->remote_read(sim.now(), bytes);
      if (ctx_.functional && !op.reg) {
        p.values.clear();
        for (std::uint32_t i = 0; i < lines; ++i) {
          const std::uint64_t src = op.local_off + (p.line_addr(i) - op.addr);
          ctx_.fmem->read_values(unicast_addr(ctx_.rank, src), line_bytes, elem_scratch_);
          p.values.insert(p.values.end(), elem_scratch_.begin(), elem_scratch_.end());
        }
      }
      break;
    }
    default:  // CAIS_RED: one contribution
      p.payload_bytes = bytes;
      p.count = 1;
      cls = kPost;
      break;
  }
  if (ctx_.functional && op.reg) {
    packet_elements(op, p, bytes, elems_);  // also checks a load's request covers only the tile
    if (!loads_register(op.op)) {
      p.values.clear();
      for (std::uint32_t e : elems_) p.values.push_back(op.data[e]);
    }
  } else if (ctx_.functional && p.payload_bytes && !op.flag && op.type != proto::PKT_DMA) {
    p.values.assign(p.payload_bytes / op.elem_bytes, op.value);
  }
  if (sends_sm_data(op)) {  // the packet's bytes cross where its op's booking has them
    op.port_sent += bytes;
    const auto after = static_cast<TimePs>(static_cast<double>(op.port_total - std::min(op.port_total, op.port_sent)) /
                                           ctx_.mem->store_rate());
    sm_port_free_at_[op.queue] = std::max(sim.now(), op.port_end > after ? op.port_end - after : TimePs{0});
  }
  NvlinkPorts& ports = *ctx_.ports;
  p.flits = ports.flits(p.payload_bytes, lines);
  ports.enqueue(h, ports.plane(p.addr), cls);
}

void RemotePacketizer::on_response(PacketHandle h) {
  Sim& sim = ctx_.sim;
  const Packet& p = sim.packets()[h];
  const auto oi = static_cast<std::uint32_t>(p.tag & 0xffffffffu);
  if (oi >= ops_.size() || !ops_[oi].in_use)
    throw InvariantError(ctx_.name() + ": response " + proto::PacketType_Name(p.type) + " for no request (tag " +
                         std::to_string(p.tag) + ")");
  RemoteOp& op = ops_[oi];
  latency_ns_.add(static_cast<double>(sim.now() - p.inject_ps) / 1000.0);
  if (op.op == isa::DMA_COPY || op.op == isa::DMA_REDUCE) {  // pulled data lands in local memory
    ctx_.mem->remote_write(sim.now(), p.payload_bytes);
    if (ctx_.functional) {
      const std::size_t per_line = p.values.size() / p.lines;
      for (std::uint32_t i = 0; i < p.lines; ++i) {
        const std::uint64_t dst = op.local_off + (p.line_addr(i) - op.addr);
        elem_scratch_.assign(p.values.begin() + i * per_line, p.values.begin() + (i + 1) * per_line);
        ctx_.fmem->apply_store(unicast_addr(ctx_.rank, dst), elem_scratch_, op.op == isa::DMA_REDUCE);
      }
    }
  } else if (ctx_.functional) {
    ctx_.fmem->add_loaded(p.values);
    if (op.reg) place_response(op, p);
  }
  if (!posted_store(op)) queues_[op.queue].outstanding -= p.lines;
  const std::uint32_t q = op.queue, lines = p.lines;
  const bool capped = counts_toward_cap(op);
  sim.packets().release(h);
  packet_done(oi);
  pump(q);
  if (capped) retire_mergeable(lines);
}

void RemotePacketizer::on_red_ack(std::uint32_t lines) {
  if (!ctx_.cfg.mergeable_cap_lines)
    throw InvariantError(ctx_.name() + ": CAIS_RED_ACK without net.cais_merge.outstanding_cap");
  red_ack_lines_ += lines;
  retire_mergeable(lines);
}

void RemotePacketizer::retire_mergeable(std::uint64_t lines) {
  if (lines > mergeable_)
    throw InvariantError(ctx_.name() + ": " + std::to_string(lines) + " mergeable lines retired, " +
                         std::to_string(mergeable_) + " outstanding");
  mergeable_ -= lines;
  // Resume the queues that stalled on the cap, oldest first; one that stalls again goes to the back.
  for (std::size_t n = cap_waiters_.size(); n > 0 && mergeable_ < ctx_.cfg.mergeable_cap_lines; --n) {
    const std::uint32_t qi = cap_waiters_.front();
    cap_waiters_.pop_front();
    cap_waiting_[qi] = 0;
    pump(qi);
  }
}

void RemotePacketizer::packet_done(std::uint32_t oi) {
  RemoteOp& op = ops_[oi];
  if (!op.in_use || op.pending == 0) throw InvariantError(ctx_.name() + ": completion for an unknown request");
  --op.pending;
  if (op.pending == 0 && op.all_issued) {
    const std::uint32_t tbi = op.tb;
    if (op.reg && loads_register(op.op)) ctx_.regs->remote_load_done(tbi, op.reg);
    if (op.fill_key) {
      held_fetches_.erase(op.fill_key);
      ctx_.rcache->filled(op.fill_key, static_cast<std::uint64_t>(op.rows) * op.row_bytes, tbi, op.reg);
    }
    op.in_use = false;
    free_ops_.push_back(oi);
    --live_;
    const bool load = loads_register(op.op);
    ctx_.exec->mem_op_done(tbi);
    if (load) ctx_.exec->remote_load_done(tbi);
  }
}

void RemotePacketizer::bind_register(RemoteOp& op, const Tb& tb) {
  const std::uint64_t off = op.addr & kOffsetMask;
  if (off % 32 || op.row_bytes % 32 || (op.rows > 1 && op.row_stride % 32)) {
    throw InvariantError(ctx_.name() + ": kernel " + quote(ctx_.sched->launch(tb.launch).dk->k->name()) + " pc " +
                         std::to_string(op.pc) + ": a remote register tile needs 32 B aligned rows (address, " +
                         "row_bytes and stride multiples of 32): its packets carry whole 32 B sectors");
  }
  const std::size_t elements = static_cast<std::size_t>(op.rows) * op.row_bytes / op.elem_bytes;
  if (loads_register(op.op)) {
    ctx_.regs->begin_load(op.tb, op.reg, elements, op.pc, true, 0);
  } else {
    const std::vector<double>& v = ctx_.regs->read(op.tb, op.reg, elements, op.pc);
    op.data.assign(v.begin(), v.end());
  }
}

void RemotePacketizer::packet_elements(const RemoteOp& op, const Packet& p, std::uint32_t bytes,
                                       std::vector<std::uint32_t>& out) const {
  out.clear();
  const std::uint32_t line_bytes = bytes / p.lines;
  for (std::uint32_t i = 0; i < p.lines; ++i) {
    const std::uint64_t addr = p.line_addr(i);
    for (std::uint64_t a = addr; a < addr + line_bytes; a += op.elem_bytes) {
      const std::uint64_t rel = a - op.addr, row = rel / op.row_stride, col = rel % op.row_stride;
      if (a < op.addr || row >= op.rows || col >= op.row_bytes) {
        const Tb& tb = ctx_.sched->tb(op.tb);
        throw InvariantError(ctx_.name() + ": kernel " + quote(ctx_.sched->launch(tb.launch).dk->k->name()) + " pc " +
                             std::to_string(op.pc) + ": a packet of a register tile would carry bytes outside the " +
                             "tile (rows with gaps between them within one " +
                             std::to_string(ctx_.cfg.max_packet_bytes) + " B packet line)");
      }
      out.push_back(static_cast<std::uint32_t>((row * op.row_bytes + col) / op.elem_bytes));
    }
  }
}

void RemotePacketizer::place_response(const RemoteOp& op, const Packet& p) {
  if (p.values.size() * op.elem_bytes != p.payload_bytes)
    throw InvariantError(ctx_.name() + ": " + proto::PacketType_Name(p.type) + " for a register load carries " +
                         std::to_string(p.values.size()) + " values for " + std::to_string(p.payload_bytes) +
                         " B (functional workloads need net.functional=true)");
  packet_elements(op, p, p.payload_bytes, elems_);
  std::vector<double>& reg = ctx_.regs->values(op.tb, op.reg);
  for (std::size_t i = 0; i < elems_.size(); ++i) reg[elems_[i]] = p.values[i];
}

}  // namespace cais::gpu
