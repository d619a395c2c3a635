#include "cais/gpu/remote_packetizer.h"

#include <algorithm>

#include "cais/dma.h"
#include "cais/errors.h"
#include "cais/gpu/block_executor.h"
#include "cais/gpu/functional_memory.h"
#include "cais/gpu/local_memory.h"
#include "cais/gpu/nvlink_ports.h"
#include "cais/gpu/tb_scheduler.h"
#include "cais/gpu/tile_registers.h"

namespace cais::gpu {

RemotePacketizer::RemotePacketizer(GpuContext& ctx) : ctx_(ctx) {
  queues_.resize(ctx.cfg.num_sms + 1);
  cap_waiting_.assign(queues_.size(), 0);
  post_waiting_.assign(queues_.size(), 0);
}

void RemotePacketizer::issue(std::uint32_t tbi, const isa::Instr& ins, std::uint32_t queue) {
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
  op = RemoteOp{};
  op.data = std::move(keep);
  op.in_use = true;
  op.tb = tbi;
  op.queue = queue;
  op.op = ins.op();
  op.group = tb.group;
  op.row_bytes = ins.row_bytes();
  op.row_stride = ins.row_stride() ? ins.row_stride() : ins.row_bytes();
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
  ++live_;
  ++tb.outstanding;
  if (loads_register(ins.op())) ++tb.remote_loads;
  queues_[queue].ops.push_back(oi);
  pump(queue);
}

void RemotePacketizer::pump(std::uint32_t qi) {
  IssueQueue& q = queues_[qi];
  const std::uint32_t limit = qi == ctx_.cfg.num_sms ? ctx_.cfg.dma_max_outstanding : ctx_.cfg.max_outstanding_per_sm;
  while (!q.ops.empty()) {
    if (!throttled_groups_.empty() && held(ops_[q.ops.front()])) {
      // A THROTTLE holds only its group's TB (spec 3.5 step 3): the first op of a group that
      // is not held goes ahead of the held ones (a TB's ops share its group, so each TB's ops
      // keep their order). Not while the held op has lines waiting in this queue's bulk
      // packets: sending them short would group its lines unlike the other GPUs, and another
      // op's lines must not join them.
      std::size_t pick = 1;
      if (!bulk_pending(qi))
        while (pick < q.ops.size() && held(ops_[q.ops[pick]])) ++pick;
      if (pick >= q.ops.size() || bulk_pending(qi)) {
        ++throttle_stalls_;
        return;  // resumed when a throttle is lifted
      }
      const std::uint32_t ahead = q.ops[pick];
      q.ops.erase(q.ops.begin() + static_cast<std::ptrdiff_t>(pick));
      q.ops.push_front(ahead);
      ++throttle_bypasses_;
    }
    const std::uint32_t oi = q.ops.front();
    RemoteOp& op = ops_[oi];
    const bool capped = counts_toward_cap(op);
    if (capped && mergeable_ >= ctx_.cfg.mergeable_cap_lines) {
      ++cap_stalls_;
      if (!cap_waiting_[qi]) {
        cap_waiting_[qi] = 1;
        cap_waiters_.push_back(qi);
      }
      return;  // resumed by a response or CAIS_RED_ACK (retire_mergeable)
    }
    const bool store = posted_store(op);
    const bool posted = op.type == proto::PKT_CAIS_RED || store;  // red.cais: complete on the wire
    if (!posted && q.outstanding >= limit) {
      ++outstanding_stalls_;
      return;
    }
    if (store) {
      NvlinkPorts& ports = *ctx_.ports;
      if (!line_flits_) line_flits_ = ports.flits(ctx_.cfg.max_packet_bytes);
      const std::uint32_t port = next_line_port(op);
      if (!ports.post_room(port, line_flits_)) {
        ++post_credit_stalls_;
        // Lines held for bulk packets go now: they hold reserved flits, which a stalled queue
        // must not keep from the other queues (nor from itself).
        if (bulk_lines(qi) > 1) send_all_bulk(qi, oi);
        if (post_waiters_.empty()) post_waiters_.resize(ports.num_ports());
        if (post_waiting_[qi] != port + 1) {  // an entry in another port's FIFO goes stale
          post_waiting_[qi] = port + 1;
          post_waiters_[port].push_back(qi);
        }
        return;  // resumed by a credit on that port (resume_posted)
      }
    }
    std::uint64_t addr = 0;
    std::uint32_t bytes = 0;
    next_packet(op, q, addr, bytes);
    if (store) ctx_.ports->reserve_post(ctx_.ports->plane(addr), ctx_.ports->flits(bytes));
    if (!posted) ++q.outstanding;
    if (capped) mergeable_high_water_ = std::max(mergeable_high_water_, ++mergeable_);
    if (op.flag || bulk_lines(qi) == 1) {
      ++op.pending;
      emit(op, oi, &addr, 1, bytes);
      continue;
    }
    add_line(qi, oi, addr, bytes);
    if (op.all_issued) send_all_bulk(qi, oi);
  }
}

std::uint32_t RemotePacketizer::next_line_port(const RemoteOp& op) const {
  const std::uint64_t a = op.addr + static_cast<std::uint64_t>(op.row) * op.row_stride + op.col;
  return ctx_.ports->plane(a & ~31ull);  // next_packet's packet address: the sector of its first byte
}

void RemotePacketizer::resume_posted(std::uint32_t port) {
  if (post_waiters_.empty()) return;
  std::deque<std::uint32_t>& w = post_waiters_[port];
  // Oldest first; a queue that stalls again goes to the back of a FIFO (its next line's port's).
  for (std::size_t n = w.size(); n > 0 && !w.empty() && ctx_.ports->post_room(port, line_flits_); --n) {
    const std::uint32_t qi = w.front();
    w.pop_front();
    if (post_waiting_[qi] != port + 1) continue;  // stale: it waits on another port now
    post_waiting_[qi] = 0;
    pump(qi);
  }
}

std::uint32_t RemotePacketizer::bulk_lines(std::uint32_t qi) {
  const bool dma = qi == ctx_.cfg.num_sms;
  std::uint32_t& n = bulk_cap_[dma ? 1 : 0];
  if (n) return n;
  n = ctx_.cfg.bulk_lines;
  if (n > 1) {
    NvlinkPorts& ports = *ctx_.ports;
    planes_ = ports.num_ports();
    const std::uint32_t limit = dma ? ctx_.cfg.dma_max_outstanding : ctx_.cfg.max_outstanding_per_sm;
    // Lines held back (at most planes x (N-1)) must leave one request in flight to pump again.
    n = std::min(n, (limit - 1) / std::max<std::uint32_t>(1, planes_) + 1);
    n = std::min(n, std::max<std::uint32_t>(1, ports.min_vc_flits() / ports.flits(ctx_.cfg.max_packet_bytes)));
    // Mergeable lines held back by all SM queues (< num_sms x planes x N) must stay below the
    // per-GPU cap, so that a stalled GPU always has lines in flight whose acks resume it.
    if (!dma && ctx_.cfg.mergeable_cap_lines)
      n = std::min(n, (ctx_.cfg.mergeable_cap_lines - 1) / (ctx_.cfg.num_sms * std::max<std::uint32_t>(1, planes_)) + 1);
    bulk_.resize(static_cast<std::size_t>(queues_.size()) * planes_);
  }
  return n;
}

// A new bulk packet counts as pending for its op from its first line, so that the op cannot
// complete while lines of it wait here.
void RemotePacketizer::add_line(std::uint32_t qi, std::uint32_t oi, std::uint64_t addr, std::uint32_t bytes) {
  const std::uint32_t plane = ctx_.ports->plane(addr);
  Bulk& b = bulk_[static_cast<std::size_t>(qi) * planes_ + plane];
  if (b.lines && b.line_bytes != bytes) send_bulk(qi, plane, oi);
  if (b.lines == 0) {
    ++ops_[oi].pending;
    b.line_bytes = bytes;
  }
  b.addr[b.lines++] = addr;
  if (b.lines == bulk_lines(qi)) send_bulk(qi, plane, oi);
}

void RemotePacketizer::send_bulk(std::uint32_t qi, std::uint32_t plane, std::uint32_t oi) {
  Bulk& b = bulk_[static_cast<std::size_t>(qi) * planes_ + plane];
  const std::uint32_t lines = b.lines;
  b.lines = 0;
  emit(ops_[oi], oi, b.addr.data(), lines, b.line_bytes);
}

bool RemotePacketizer::bulk_pending(std::uint32_t qi) const {
  if (bulk_.empty()) return false;  // single-line packets (or no bulk packet cut yet)
  for (std::uint32_t plane = 0; plane < planes_; ++plane)
    if (bulk_[static_cast<std::size_t>(qi) * planes_ + plane].lines) return true;
  return false;
}

void RemotePacketizer::send_all_bulk(std::uint32_t qi, std::uint32_t oi) {
  for (std::uint32_t plane = 0; plane < planes_; ++plane)
    if (bulk_[static_cast<std::size_t>(qi) * planes_ + plane].lines) send_bulk(qi, plane, oi);
}

// The 32 B sectors touched in one max_packet_bytes line, across consecutive rows while they
// stay in that line (coalescing). Pops the op off its queue when its last row is cut.
void RemotePacketizer::next_packet(RemoteOp& op, IssueQueue& q, std::uint64_t& addr, std::uint32_t& bytes) {
  const std::uint64_t line = ctx_.cfg.max_packet_bytes;
  std::uint64_t line_no = ~0ull, mask = 0;
  for (;;) {
    const std::uint64_t row_start = op.addr + static_cast<std::uint64_t>(op.row) * op.row_stride;
    const std::uint64_t a = row_start + op.col;
    if (line_no != ~0ull && a / line != line_no) break;
    line_no = a / line;
    const std::uint64_t chunk_end = std::min(row_start + op.row_bytes, (line_no + 1) * line);
    for (std::uint64_t sct = (a % line) / 32; sct <= ((chunk_end - 1) % line) / 32; ++sct) mask |= 1ull << sct;
    op.col += static_cast<std::uint32_t>(chunk_end - a);
    if (op.col < op.row_bytes) break;  // the row continues in the next line
    op.col = 0;
    if (++op.row >= op.rows) {
      op.all_issued = true;
      q.ops.pop_front();
      break;
    }
  }
  addr = line_no * line + 32ull * static_cast<std::uint64_t>(__builtin_ctzll(mask));
  bytes = static_cast<std::uint32_t>(32 * __builtin_popcountll(mask));
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

// No new mergeable request of a group while any switch throttles it (feature_cais_merge.h).
// A hold ends at THROTTLE aux = 0 or after its aux ns, whichever comes first: the switch sends
// no lift for a hold that has run out.
void RemotePacketizer::throttle(std::uint32_t sw, std::uint32_t group, bool on, TimePs hold_ps) {
  ++throttles_;
  const std::uint64_t key = (static_cast<std::uint64_t>(sw) << 32) | group;
  if (!on) return lift(key);
  const TimePs until = ctx_.now() + hold_ps;
  auto [it, fresh] = throttle_until_.try_emplace(key, until);
  if (fresh) ++throttled_groups_[group];
  it->second = until;
  ctx_.schedule(until, kThrottleExpiry, key);
}

void RemotePacketizer::hold_expired(std::uint64_t key) {
  auto it = throttle_until_.find(key);
  if (it != throttle_until_.end() && it->second <= ctx_.now()) lift(key);
}

void RemotePacketizer::lift(std::uint64_t key) {
  if (!throttle_until_.erase(key)) return;
  const auto group = static_cast<std::uint32_t>(key);
  if (--throttled_groups_[group] == 0) {
    throttled_groups_.erase(group);
    for (std::uint32_t q = 0; q < queues_.size(); ++q)
      if (!queues_[q].ops.empty()) pump(q);
  }
}

}  // namespace cais::gpu
