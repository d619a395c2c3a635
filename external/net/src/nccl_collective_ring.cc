// NCCL collective model: the ring protocol (Simple): a channel's slices, flags, fences and
// write acknowledgements. What it models: nccl_collective_model.h.
#include "nccl_collective_model.h"

namespace cais::net::nccl_model {

void NcclCollectiveModel::ring_advance(std::uint32_t c) {
  RingChan& ch = chans_[c];
  const auto& ops = ring_.channels[c];
  while (!ch.busy && ch.pc < ops.size()) {
    if (ch.posting) return stall(ch);  // the next slice waits for the fence
    const SliceOp& op = ops[ch.pc];
    const bool rv = prim_recv(op.prim), sd = prim_send(op.prim);
    if (rv && ch.tail_contig <= ch.recv_started) return begin_wait(ch, kWaitData);          // data not there yet
    if (sd && ch.send_started >= ch.head_contig + slots_) return begin_wait(ch, kWaitSlot);  // no free slot
    end_wait(ch);
    ch.send_started += sd;
    ch.recv_started += rv;
    if (functional_ && prim_writes_output(op.prim))
      for (std::uint64_t i = op.offset / kElemBytes; i < (op.offset + op.bytes) / kElemBytes; ++i)
        out_vals_[i] = result_val(op.prim, i);
    if (op.bytes && prim_rate_[static_cast<int>(op.prim)] > 0) {  // the CTA copies the slice at its own rate
      ch.busy = true;
      ch.issue_off = 0;
      cta_step(c);
      return;
    }
    if (sd && op.bytes)
      for (std::uint64_t off = 0; off < op.bytes; off += bulk_bytes_)
        emit_data(c, op, off, std::min<std::uint64_t>(bulk_bytes_, op.bytes - off));
    end_slice(c);
  }
  if (ch.pc == ops.size() && !ch.busy && !ch.posting && ch.done_ps == 0) {
    ch.done_ps = sim_.now();
    chan_done_first_ps_ = std::min(chan_done_first_ps_, ch.done_ps);
  }
  update_finish();
}

// The end of a slice: a send slice with writes outstanding is fenced (__threadfence_system)
// before its tail flag; otherwise the flags go at once.
void NcclCollectiveModel::end_slice(std::uint32_t c) {
  RingChan& ch = chans_[c];
  const SliceOp& op = ring_.channels[c][ch.pc];
  if (prim_send(op.prim) && ch.unacked)
    ch.posting = true;
  else
    ring_post(c, ch.pc);
  ++ch.pc;
}

void NcclCollectiveModel::stall(RingChan& ch) {
  if (ch.stalled) return;
  ch.stalled = true;
  ch.stall_since = sim_.now();
}

// The fence completed: post the slice's flags, go on with the next slice.
void NcclCollectiveModel::finish_post(std::uint32_t c) {
  RingChan& ch = chans_[c];
  ch.posting = false;
  if (ch.stalled) {
    fence_ps_ += sim_.now() - ch.stall_since;
    ch.stalled = false;
  }
  ring_post(c, ch.pc - 1);
  ring_advance(c);
}

void NcclCollectiveModel::begin_wait(RingChan& ch, WaitKind k) {
  if (ch.waiting == kNotWaiting) {
    ch.waiting = k;
    ch.since = sim_.now();
  }
}

void NcclCollectiveModel::end_wait(RingChan& ch) {
  if (ch.waiting == kNotWaiting) return;
  (ch.waiting == kWaitData ? wait_data_ps_ : wait_slot_ps_) += sim_.now() - ch.since;
  ch.waiting = kNotWaiting;
}

// One step of a CTA copying a slice at collective.cta_bw_gbps: a send primitive issues its
// next (bulk) packet, a receive-only primitive copies the slice to the output in one step.
void NcclCollectiveModel::cta_step(std::uint32_t c) {
  RingChan& ch = chans_[c];
  const SliceOp& op = ring_.channels[c][ch.pc];
  if (ch.issue_off >= op.bytes) {
    ch.busy = false;
    end_slice(c);
    ring_advance(c);
    return;
  }
  std::uint64_t b = op.bytes - ch.issue_off;
  if (prim_send(op.prim)) {
    b = std::min<std::uint64_t>(bulk_bytes_, b);
    emit_data(c, op, ch.issue_off, b);
  }
  ch.issue_off += b;
  schedule(sim_.now() + serialization_ps(b, prim_rate_[static_cast<int>(op.prim)]), kCtaStep, 0, c);
}

// A primitive's CTA rate by its load/store shape: collective.cta_<shape>_gbps where set (> 0),
// else collective.cta_bw_gbps. Shapes (loads/stores per element): copy 1/1 (send, recv),
// copy_send 1/2 (copySend, recvCopySend), reduce 2/1 (recvReduceSend, recvReduceCopy),
// reduce_send 2/2 (recvReduceCopySend).
void NcclCollectiveModel::init_prim_rates(const Params& p) {
  const double cta_bw = p.get_double("collective.cta_bw_gbps");
  if (cta_bw < 0) throw ConfigError("collective.cta_bw_gbps", "must be >= 0 (0: unlimited)");
  auto rate = [&](const char* key) {
    const double v = p.get_double(key);
    if (v < 0) throw ConfigError(key, "must be >= 0 (0: collective.cta_bw_gbps)");
    return v > 0 ? v : cta_bw;
  };
  const double copy = rate("collective.cta_copy_gbps"),
                           copy_send = rate("collective.cta_copy_send_gbps");
  const double reduce = rate("collective.cta_reduce_gbps"),
                             reduce_send = rate("collective.cta_reduce_send_gbps");
  auto set = [&](Prim pr, double v) { prim_rate_[static_cast<int>(pr)] = v; };
  set(Prim::kSend, copy);
  set(Prim::kRecv, copy);
  set(Prim::kCopySend, copy_send);
  set(Prim::kRecvCopySend, copy_send);
  set(Prim::kRecvReduceSend, reduce);
  set(Prim::kRecvReduceCopy, reduce);
  set(Prim::kRecvReduceCopySend, reduce_send);
}

void NcclCollectiveModel::emit_data(std::uint32_t c, const SliceOp& op, std::uint64_t off,
                                    std::uint64_t b) {
  RingChan& ch = chans_[c];
  const std::uint64_t addr = (static_cast<std::uint64_t>(next_rank()) << 40) | (op.offset + off);
  const PacketHandle h =
      make(proto::PKT_WRITE, next_rank(), addr, b, wire_flits(b),
           make_tag(c, kData, prim_sends_final(op.prim), 0));
  if (functional_) {
    auto& v = sim_.packets()[h].values;
    for (std::uint64_t i = (op.offset + off) / kElemBytes; i < (op.offset + off + b) / kElemBytes; ++i)
      v.push_back(result_val(op.prim, i));
  }
  data_tx_bytes_ += b;
  ++ch.unacked;
  ++unacked_total_;
  enqueue(h, kReqVc);
}

void NcclCollectiveModel::send_flag(std::uint32_t dst, std::uint32_t c, TagKind k,
                                    std::uint64_t seq) {
  const std::uint64_t addr = (static_cast<std::uint64_t>(dst) << 40) | kFlagSpace | (static_cast<std::uint64_t>(c) << 20) |
                             (static_cast<std::uint64_t>(k) << 16);
  const PacketHandle h = make(proto::PKT_WRITE, dst, addr, kFlagBytes, wire_flits(kFlagBytes),
                              make_tag(c, k, false, seq));
  ++flags_tx_;
  ++unacked_total_;
  enqueue(h, kReqVc);
}

void NcclCollectiveModel::ring_post(std::uint32_t c, std::size_t slice) {
  RingChan& ch = chans_[c];
  const SliceOp& op = ring_.channels[c][slice];
  if (prim_send(op.prim)) send_flag(next_rank(), c, kTail, ch.send_idx++);
  if (prim_recv(op.prim)) send_flag(prev_rank(), c, kHead, ch.recv_idx++);
}

void NcclCollectiveModel::mark(std::vector<std::uint8_t>& v, std::uint64_t& contig,
                               std::uint64_t seq) {

       if (seq >= v.size() || v[seq]) throw InvariantError("collective: unexpected flag sequence number");
  v[seq] = 1;
  while (contig < v.size() && v[contig]) ++contig;
}

void NcclCollectiveModel::on_write(PacketHandle h) {
  const Packet& p = sim_.packets()[h];
  const std::uint32_t c = tag_channel(p.tag);
  if (c >= chans_.size()) throw InvariantError(name() + ": write for unknown channel");
  switch (tag_kind(p.tag)) {
    case kData: {
      data_rx_bytes_ += p.payload_bytes;
      if (functional_) {
        auto& buf = tag_final(p.tag) ? ag_in_ : rs_in_;
        const std::uint64_t first = (p.addr & kOffsetMask) / kElemBytes;
        if (p.values.size() * kElemBytes != p.payload_bytes) throw InvariantError(name() + ": data packet without values");
        for (std::size_t k = 0; k < p.values.size(); ++k) buf[first + k] = p.values[k];
      }
      return;
    }
    case kTail: mark(chans_[c].tails, chans_[c].tail_contig, tag_seq(p.tag)); break;
    case kHead: mark(chans_[c].heads, chans_[c].head_contig, tag_seq(p.tag)); break;
  }
  ring_advance(c);
}

void NcclCollectiveModel::on_write_ack(std::uint64_t tag) {
  --unacked_total_;
  if (tag_kind(tag) == kData) {
    const std::uint32_t c = tag_channel(tag);
    RingChan& ch = chans_[c];
    if (ch.unacked == 0) throw InvariantError(name() + ": unexpected write ack");
    if (--ch.unacked == 0 && ch.posting) finish_post(c);
  }
  update_finish();
}

}  // namespace cais::net::nccl_model
