// Hopper GPU: local memory (SM port, L2, HBM servers), remote operations as NVLink packets,
// the NVLink hub that answers peers, and functional memory for tests.
#include <algorithm>

#include "cais/errors.h"
#include "cais/gpu/hopper_gpu.h"

namespace cais::gpu {

// ------------------------------------------------------------------ local memory
bool HopperGpu::l2_lookup_insert(std::uint64_t key, std::uint64_t bytes) {
  return l2_tiles_.lookup_insert(key, static_cast<std::uint32_t>(std::min<std::uint64_t>(bytes, 0xffffffffu)));
}

TimePs HopperGpu::local_access(std::uint32_t sm, std::uint64_t key, std::uint64_t bytes, bool write) {
  const TimePs now = sim_.now();
  TimePs t = std::max(sms_[sm].port.reserve(now, bytes), l2_.reserve(now, bytes)) + cfg_.l2_latency_ps;
  const bool hit = l2_lookup_insert(key, bytes);
  if (write) {
    hbm_.reserve(now, bytes);  // write-back traffic; the store completes in L2
  } else if (!hit) {
    ++l2_misses_;
    hbm_read_bytes_ += bytes;
    t = std::max(t, hbm_.reserve(now, bytes) + cfg_.hbm_latency_ps + cfg_.l2_latency_ps);
  } else {
    ++l2_hits_;
  }
  return t;
}

// ------------------------------------------------------------------ remote operations
void HopperGpu::issue_remote(std::uint32_t tbi, const isa::Instr& ins, std::uint32_t queue) {
  Tb& tb = tbs_[tbi];
  const LaunchState& L = launches_[tb.launch];
  const std::int64_t g = rank_;
  std::uint32_t oi;
  if (free_ops_.empty()) {
    oi = static_cast<std::uint32_t>(ops_.size());
    ops_.emplace_back();
  } else {
    oi = free_ops_.back();
    free_ops_.pop_back();
  }
  RemoteOp& op = ops_[oi];
  op = RemoteOp{};
  op.in_use = true;
  op.tb = tbi;
  op.queue = queue;
  op.op = ins.op();
  op.group = tb.group;
  op.rows = std::max<std::uint32_t>(1, ins.rows());
  op.row_bytes = ins.row_bytes();
  op.row_stride = ins.row_stride() ? ins.row_stride() : ins.row_bytes();
  op.buffer = ins.buffer();
  op.elem_bytes = wl_->buffers()[ins.buffer()].elem_bytes;
  op.value = ins.value() ? static_cast<double>(ins.value()) : static_cast<double>(rank_ + 1);
  const auto ev = [&](const isa::Affine& a) { return eval_affine(a, tb.bx, tb.by, g, tb.loops.data(), tb.depth); };
  const std::uint64_t off = wl_->buffers()[ins.buffer()].base + static_cast<std::uint64_t>(ev(ins.addr()));
  op.peer = static_cast<std::uint32_t>(ev(ins.peer()));
  switch (ins.op()) {
    case isa::LD_REMOTE: op.type = proto::PKT_READ_REQ; break;
    case isa::ST_REMOTE: op.type = proto::PKT_WRITE; break;
    case isa::LD_CAIS: op.type = proto::PKT_CAIS_LD_REQ; op.aux = participants_excluding(L, op.peer); break;
    case isa::RED_CAIS: op.type = proto::PKT_CAIS_RED; op.aux = participants_excluding(L, op.peer); break;
    case isa::MM_LD_REDUCE: op.type = proto::PKT_MM_LD_REDUCE_REQ; break;
    case isa::MM_ST: op.type = proto::PKT_MM_ST; break;
    case isa::MM_RED: op.type = proto::PKT_MM_RED; break;
    case isa::DMA_COPY:
    case isa::DMA_REDUCE: {
      op.type = proto::PKT_READ_REQ;
      if (ins.rows() > 1 && ins.row_stride() && ins.row_stride() != ins.row_bytes())
        throw ConfigError("workload", "dma ops move contiguous ranges (rows x row_bytes with stride == row_bytes)");
      op.local_off = off;
      op.addr = unicast_addr(op.peer, wl_->buffers()[ins.src_buffer()].base + static_cast<std::uint64_t>(ev(ins.src_addr())));
      op.elem_bytes = wl_->buffers()[ins.src_buffer()].elem_bytes;
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
    op.aux = wl_->proto().num_gpus();
  } else if (ins.op() != isa::DMA_COPY && ins.op() != isa::DMA_REDUCE) {
    op.addr = unicast_addr(op.peer, off);
  }
  if (op.row_bytes == 0) {  // nothing to move
    free_ops_.push_back(oi);
    op.in_use = false;
    ++tb.outstanding;
    schedule(sim_.now(), kMemDone, tbi);
    return;
  }
  ++ops_live_;
  ++tb.outstanding;
  sms_[queue].remote_q.push_back(oi);
  pump_sm(queue);
}

void HopperGpu::pump_sm(std::uint32_t q) {
  SmState& s = sms_[q];
  const std::uint32_t limit = q == cfg_.num_sms ? cfg_.dma_max_outstanding : cfg_.max_outstanding_per_sm;
  while (!s.remote_q.empty()) {
    if (!throttled_groups_.empty()) {
      const RemoteOp& head = ops_[s.remote_q.front()];
      const bool mergeable = head.type == proto::PKT_CAIS_LD_REQ || head.type == proto::PKT_CAIS_RED;
      if (mergeable && throttled_groups_.count(head.group)) {
        ++throttle_stalls_;
        return;  // resumed when the group's throttle is lifted
      }
    }
    const std::uint32_t oi = s.remote_q.front();
    RemoteOp& op = ops_[oi];
    const bool posted = op.type == proto::PKT_CAIS_RED;  // multimem stores complete on the switch's MM_ACK
    if (!posted && s.outstanding >= limit) {
      ++outstanding_stalls_;
      return;
    }
    // Next packet: the 32 B sectors touched in one max_packet_bytes line, across consecutive
    // rows while they stay in that line (coalescing).
    const std::uint64_t line = cfg_.max_packet_bytes;
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
        s.remote_q.pop_front();
        break;
      }
    }
    const std::uint64_t s0 = line_no * line + 32ull * static_cast<std::uint64_t>(__builtin_ctzll(mask));
    const auto bytes = static_cast<std::uint32_t>(32 * __builtin_popcountll(mask));
    ++op.pending;
    if (!posted) ++s.outstanding;

    const PacketHandle h = sim_.new_packet(*this);
    Packet& p = sim_.packets()[h];
    p.type = op.type;
    p.src = node_;
    p.origin = node_;
    p.dst = op.peer;
    p.addr = op.flag ? op.addr : s0;  // a flag is an 8 B word: keep its exact address, not its sector's
    p.group = op.group;
    // tag: op index (low 32 bits) | packet sequence (bits 32..61; unique per request in flight,
    // as switches key multicast completions by (src, tag)) | flag-write bit 62.
    p.tag = oi | ((++tag_seq_ & ((1ull << 30) - 1)) << 32) | (op.flag ? kFlagTag : 0);
    p.inject_ps = sim_.now();
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
      default:  // CAIS_RED, MM_ST, MM_RED
        p.payload_bytes = bytes;
        p.count = 1;
        cls = kPost;
        break;
    }
    switch (op.type) {
      case proto::PKT_MM_ST:
      case proto::PKT_MM_RED:
        p.count = 0;
        break;
      default:
        break;
    }
    if (functional_ && p.payload_bytes && !op.flag) p.values.assign(p.payload_bytes / op.elem_bytes, op.value);
    p.flits = flits_for(p.payload_bytes, flit_bytes_, header_flits_);
    enqueue(h, planes_.plane(p.addr), cls);
  }
}

void HopperGpu::packet_done(std::uint32_t oi) {
  RemoteOp& op = ops_[oi];
  if (!op.in_use || op.pending == 0) throw InvariantError(name() + ": completion for an unknown request");
  --op.pending;
  if (op.pending == 0 && op.all_issued) {
    const std::uint32_t tbi = op.tb;
    op.in_use = false;
    free_ops_.push_back(oi);
    --ops_live_;
    mem_op_done(tbi);
  }
}

void HopperGpu::send_sync(std::uint32_t group, std::uint32_t participants) {
  const PacketHandle h = sim_.new_packet(*this);
  Packet& p = sim_.packets()[h];
  p.type = proto::PKT_SYNC_REQ;
  p.src = p.origin = node_;
  p.group = group;
  p.aux = participants;
  p.inject_ps = sim_.now();
  p.flits = flits_for(0, flit_bytes_, header_flits_);
  const std::uint32_t port = planes_.plane_for_key(group);
  p.dst = sim_.node(node_).out[port].peer_node;
  ++sync_reqs_;
  enqueue(h, port, kReq);
}

// ------------------------------------------------------------------ ports
void HopperGpu::enqueue(PacketHandle h, std::uint32_t port, std::uint32_t cls) {
  port_q_[port][cls].push_back(h);
  pump_port(port);
}

void HopperGpu::pump_port(std::uint32_t port) {
  OutputChannel& ch = out_[port];
  if (!ch.idle_at(sim_.now())) return;  // a kPortFree event is pending
  for (std::uint32_t cls : {kResp, kPost, kReq}) {
    auto& q = port_q_[port][cls];
    const std::uint32_t vc = vc_of_[cls];
    if (q.empty() || !ch.has_credits(vc, sim_.packets()[q.front()].flits)) continue;
    const PacketHandle h = q.front();
    q.pop_front();
    const Packet& p = sim_.packets()[h];
    const auto type = p.type;
    const std::uint64_t tag = p.tag;
    tx_bytes_[type] += p.payload_bytes;
    ++tx_packets_[type];
    const TimePs free_at = ch.transmit(sim_, *this, h, vc);
    schedule(free_at, kPortFree, 0, port);
    // Posted requests (red.cais) are complete once on the wire.
    if (type == proto::PKT_CAIS_RED && cls == kPost && (tag & kFlagTag) == 0) packet_done(static_cast<std::uint32_t>(tag & 0xffffffffu));
    return;
  }
}

// ------------------------------------------------------------------ NVLink hub
void HopperGpu::on_arrival(PacketHandle h) {
  Packet& p = sim_.packets()[h];
  const std::uint32_t port = p.hop_port;
  if (p.type == proto::PKT_CREDIT) {
    out_[port].return_credits(p.vc, p.count);
    sim_.packets().release(h);
    pump_port(port);
    return;
  }
  in_[port].accept(sim_, h);
  in_[port].pop(sim_, *this, p.vc);  // the hub sinks packets at line rate
  rx_bytes_[p.type] += p.payload_bytes;
  ++rx_packets_[p.type];
  switch (p.type) {
    case proto::PKT_READ_REQ:
    case proto::PKT_CAIS_LD_REQ:
    case proto::PKT_MM_LD_REDUCE_REQ:
    case proto::PKT_WRITE:
    case proto::PKT_CAIS_RED:
    case proto::PKT_MM_ST:
    case proto::PKT_MM_RED:
      return serve(h);
    case proto::PKT_MM_ACK:  // the switch's one ack per multicast store (member acks stay in it)
    case proto::PKT_READ_RESP:
    case proto::PKT_CAIS_LD_RESP:
    case proto::PKT_MM_LD_REDUCE_RESP:
    case proto::PKT_WRITE_ACK: {
      const auto oi = static_cast<std::uint32_t>(p.tag & 0xffffffffu);
      if (oi >= ops_.size() || !ops_[oi].in_use)
        throw InvariantError(name() + ": response " + proto::PacketType_Name(p.type) + " for no request (tag " + std::to_string(p.tag) + ")");
      RemoteOp& op = ops_[oi];
      remote_latency_ns_.add(static_cast<double>(sim_.now() - p.inject_ps) / 1000.0);
      if (op.op == isa::DMA_COPY || op.op == isa::DMA_REDUCE) {
        l2_.reserve(sim_.now(), p.payload_bytes);
        hbm_.reserve(sim_.now(), p.payload_bytes);
        if (functional_) {
          const std::uint64_t dst = op.local_off + (p.addr - op.addr);
          apply_store(unicast_addr(rank_, dst), p.values, op.op == isa::DMA_REDUCE, 1, 0);
        }
      } else if (functional_) {
        for (double v : p.values) ld_value_sum_ += v;
      }
      --sms_[op.queue].outstanding;
      const std::uint32_t q = op.queue;
      sim_.packets().release(h);
      packet_done(oi);
      pump_sm(q);
      return;
    }
    case proto::PKT_SYNC_RELEASE: {
      auto it = sync_waiters_.find(p.group);
      if (it != sync_waiters_.end()) {
        std::vector<std::uint64_t> waiters;
        waiters.swap(it->second);
        sync_waiters_.erase(it);
        for (std::uint64_t w : waiters) {
          if (w & kBlockWaiter) {  // a registered block may now be dispatched
            LaunchState& L = launches_[(w >> 32) & 0x7fffffffu];
            const auto cta = static_cast<std::uint32_t>(w & 0xffffffffu);
            L.sync_ok[cta] = 1;
            sync_wait_ns_.add(static_cast<double>(sim_.now() - L.reg_ps[cta]) / 1000.0);
            request_dispatch();
            continue;
          }
          const auto t = static_cast<std::uint32_t>(w);
          Tb& tb = tbs_[t];
          sync_wait_ns_.add(static_cast<double>(sim_.now() - tb.wait_since) / 1000.0);
          if (tb.state == TbState::kSyncLaunch) {
            schedule(sim_.now() + cfg_.tb_overhead_ps, kTbStart, t);
          } else if (tb.state == TbState::kWaitSync) {
            tb.state = TbState::kRunning;
            wake(t);
          }
        }
      }
      sim_.packets().release(h);
      return;
    }
    case proto::PKT_THROTTLE: {
      // THROTTLE (group, aux = 1 on / 0 off) from switch src: no new mergeable request of that
      // group while any switch throttles it (feature_cais_merge.h).
      ++throttles_;
      const std::uint64_t key = (static_cast<std::uint64_t>(p.src) << 32) | p.group;
      if (p.aux) {
        if (throttle_keys_.insert(key).second) ++throttled_groups_[p.group];
      } else if (throttle_keys_.erase(key)) {
        if (--throttled_groups_[p.group] == 0) {
          throttled_groups_.erase(p.group);
          for (std::uint32_t q = 0; q < sms_.size(); ++q)
            if (!sms_[q].remote_q.empty()) pump_sm(q);
        }
      }
      sim_.packets().release(h);
      return;
    }
    case proto::PKT_CAIS_RED_ACK:
      sim_.packets().release(h);
      return;
    default:
      throw InvariantError(name() + ": unexpected packet type " + proto::PacketType_Name(p.type));
  }
}

// A request for this GPU's memory: access L2/HBM, then answer (reads, writes) or apply.
void HopperGpu::serve(PacketHandle h) {
  Packet& p = sim_.packets()[h];
  const bool mc = (p.addr & kMulticastBit) != 0;
  if (!mc && (p.addr >> kOwnerShift) != rank_)
    throw InvariantError(name() + ": " + proto::PacketType_Name(p.type) + " for address owned by GPU " +
                         std::to_string(p.addr >> kOwnerShift));
  ++served_requests_;
  const TimePs now = sim_.now();
  switch (p.type) {
    case proto::PKT_READ_REQ:
    case proto::PKT_CAIS_LD_REQ:
    case proto::PKT_MM_LD_REDUCE_REQ: {
      const std::uint32_t bytes = p.type == proto::PKT_READ_REQ ? p.aux : p.count;
      const TimePs t = std::max(l2_.reserve(now, bytes), hbm_.reserve(now, bytes)) + cfg_.l2_latency_ps;
      schedule(t, kRespond, h);
      return;
    }
    case proto::PKT_WRITE: {
      l2_.reserve(now, p.payload_bytes);
      hbm_.reserve(now, p.payload_bytes);
      if (p.tag & kFlagTag) flag_add(p.addr & kOffsetMask, static_cast<std::int64_t>(p.count));
      else if (functional_) apply_store(p.addr, p.values, false, 1, 0);
      schedule(now + cfg_.l2_latency_ps, kRespond, h);
      return;
    }
    default: {  // CAIS_RED (merged sum), MM_ST / MM_RED (multicast copies)
      l2_.reserve(now, p.payload_bytes);
      hbm_.reserve(now, p.payload_bytes);
      if (functional_) apply_store(p.addr, p.values, p.type != proto::PKT_MM_ST, p.count, 0);
      if (member_acks_ && (p.type == proto::PKT_MM_ST || p.type == proto::PKT_MM_RED)) {
        schedule(now + cfg_.l2_latency_ps, kRespond, h);  // MM_ACK to the issuer (NVLS member acks)
        return;
      }
      sim_.packets().release(h);
      return;
    }
  }
}

void HopperGpu::respond(PacketHandle h) {
  const Packet req = sim_.packets()[h];  // copy: new_packet may grow the pool
  const PacketHandle r = sim_.new_packet(*this);
  Packet& q = sim_.packets()[r];
  q.src = node_;
  q.dst = req.src;
  q.origin = req.origin;
  q.addr = req.addr;
  q.tag = req.tag;
  q.group = req.group;
  q.aux = req.aux;
  q.count = req.count;
  q.inject_ps = req.inject_ps;
  switch (req.type) {
    case proto::PKT_READ_REQ: q.type = proto::PKT_READ_RESP; q.payload_bytes = req.aux; break;
    case proto::PKT_CAIS_LD_REQ: q.type = proto::PKT_CAIS_LD_RESP; q.payload_bytes = req.count; break;
    case proto::PKT_MM_LD_REDUCE_REQ: q.type = proto::PKT_MM_LD_REDUCE_RESP; q.payload_bytes = req.count; break;
    case proto::PKT_WRITE: q.type = proto::PKT_WRITE_ACK; q.payload_bytes = 0; break;
    case proto::PKT_MM_ST:
    case proto::PKT_MM_RED: q.type = proto::PKT_MM_ACK; q.payload_bytes = 0; q.count = 1; break;
    default: throw InvariantError("respond: not a request");
  }
  if (functional_ && q.payload_bytes) read_values(req.addr, q.payload_bytes, q.values);
  q.flits = flits_for(q.payload_bytes, flit_bytes_, header_flits_);
  sim_.packets().release(h);
  enqueue(r, req.hop_port, kResp);
}

// ------------------------------------------------------------------ functional memory and flags
std::uint32_t HopperGpu::buffer_of(std::uint64_t heap_off) const {
  const auto& bufs = wl_->buffers();
  auto it = std::upper_bound(bufs.begin(), bufs.end(), heap_off,
                             [](std::uint64_t v, const DecodedBuffer& b) { return v < b.base; });
  if (it == bufs.begin()) throw InvariantError(name() + ": address outside every buffer");
  return static_cast<std::uint32_t>(it - bufs.begin() - 1);
}

void HopperGpu::apply_store(std::uint64_t addr, const std::vector<double>& values, bool accumulate, std::uint32_t,
                            double) {
  const std::uint64_t off = addr & kOffsetMask;
  const std::uint32_t b = buffer_of(off);
  const auto& B = wl_->buffers()[b];
  std::uint64_t e = (off - B.base) / B.elem_bytes;
  auto& m = mem_[b];
  for (double v : values) {
    if (e >= m.size()) throw InvariantError(name() + ": store past the end of buffer '" + B.b->name() + "'");
    m[e] = accumulate ? m[e] + v : v;
    ++e;
  }
}

void HopperGpu::read_values(std::uint64_t addr, std::uint32_t bytes, std::vector<double>& out) const {
  const std::uint64_t off = addr & kOffsetMask;
  const std::uint32_t b = buffer_of(off);
  const auto& B = wl_->buffers()[b];
  const std::uint64_t e0 = (off - B.base) / B.elem_bytes;
  out.clear();
  for (std::uint64_t e = e0; e < e0 + bytes / B.elem_bytes; ++e) {
    if (e >= mem_[b].size()) throw InvariantError(name() + ": load past the end of buffer '" + B.b->name() + "'");
    out.push_back(mem_[b][e]);
  }
}

void HopperGpu::fill_local(std::uint32_t buffer, std::uint64_t off, std::uint32_t rows, std::uint32_t row_bytes,
                           std::uint64_t stride, double value, bool accumulate) {
  const auto& B = wl_->buffers()[buffer];
  if (!stride) stride = row_bytes;
  for (std::uint32_t r = 0; r < rows; ++r)
    for (std::uint64_t x = 0; x < row_bytes; x += B.elem_bytes) {
      const std::uint64_t e = (off + r * stride + x) / B.elem_bytes;
      if (e >= mem_[buffer].size()) throw InvariantError(name() + ": store past the end of buffer '" + B.b->name() + "'");
      mem_[buffer][e] = accumulate ? mem_[buffer][e] + value : value;
    }
}

double HopperGpu::sum_local(std::uint32_t buffer, std::uint64_t off, std::uint32_t rows, std::uint32_t row_bytes,
                            std::uint64_t stride) const {
  const auto& B = wl_->buffers()[buffer];
  if (!stride) stride = row_bytes;
  double s = 0;
  for (std::uint32_t r = 0; r < rows; ++r)
    for (std::uint64_t x = 0; x < row_bytes; x += B.elem_bytes) {
      const std::uint64_t e = (off + r * stride + x) / B.elem_bytes;
      if (e >= mem_[buffer].size()) throw InvariantError(name() + ": load past the end of buffer '" + B.b->name() + "'");
      s += mem_[buffer][e];
    }
  return s;
}

double HopperGpu::mem_value(std::uint32_t buffer, std::uint64_t elem) const {
  return functional_ ? mem_.at(buffer).at(elem) : 0.0;
}

std::uint64_t HopperGpu::flag_value(std::uint32_t buffer, std::uint64_t off) const {
  auto it = flags_.find(wl_->buffers()[buffer].base + off);
  return it == flags_.end() ? 0 : static_cast<std::uint64_t>(it->second);
}

void HopperGpu::flag_add(std::uint64_t heap_off, std::int64_t v) {
  flags_[heap_off] += v;
  auto it = flag_waiters_.find(heap_off);
  if (it == flag_waiters_.end()) return;
  std::vector<std::uint32_t> waiters;
  waiters.swap(it->second);
  flag_waiters_.erase(it);
  for (std::uint32_t t : waiters) {
    tbs_[t].state = TbState::kRunning;  // FLAG_WAIT re-checks and parks again if still short
    wake(t);
  }
}

}  // namespace cais::gpu
