#include "cais/gpu/nvlink_hub.h"

#include "cais/dma.h"
#include "cais/errors.h"
#include "cais/gpu/functional_memory.h"
#include "cais/gpu/local_memory.h"
#include "cais/gpu/nvlink_ports.h"
#include "cais/gpu/red_arrivals.h"
#include "cais/gpu/remote_packetizer.h"
#include "cais/gpu/sync_flags.h"

namespace cais::gpu {

void NvlinkHub::on_arrival(PacketHandle h) {
  Sim& sim = ctx_.sim;
  if (sim.packets()[h].type == proto::PKT_CREDIT) return ctx_.ports->on_credit(h);
  ctx_.ports->receive(h);
  const Packet& p = sim.packets()[h];
  switch (p.type) {
    case proto::PKT_READ_REQ:
    case proto::PKT_CAIS_LD_REQ:
    case proto::PKT_MM_LD_REDUCE_REQ:
    case proto::PKT_WRITE:
    case proto::PKT_CAIS_RED:
    case proto::PKT_MM_ST:
    case proto::PKT_MM_RED:
    case proto::PKT_DMA:
      return serve(h);
    case proto::PKT_MM_ACK:  // the switch's one ack per multicast store (member acks stay in it)
    case proto::PKT_READ_RESP:
    case proto::PKT_CAIS_LD_RESP:
    case proto::PKT_MM_LD_REDUCE_RESP:
    case proto::PKT_WRITE_ACK:
      return ctx_.remote->on_response(h);
    case proto::PKT_SYNC_RELEASE: {
      const std::uint32_t group = p.group;
      ctx_.sync->release(group);
      sim.packets().release(h);
      return;
    }
    case proto::PKT_THROTTLE: {
      // THROTTLE (group, aux = hold in ns, 0 = off) from switch src (feature_cais_merge.h).
      const std::uint32_t src = p.src, group = p.group;
      ctx_.remote->throttle(src, group, p.aux != 0, ns_to_ps(static_cast<double>(p.aux)));
      sim.packets().release(h);
      return;
    }
    case proto::PKT_CAIS_RED_ACK: {  // count = this GPU's red.cais lines the switch is done with
      const std::uint32_t lines = p.count;
      sim.packets().release(h);
      ctx_.remote->on_red_ack(lines);
      return;
    }
    default:
      throw InvariantError(ctx_.name() + ": unexpected packet type " + proto::PacketType_Name(p.type));
  }
}

// A request for this GPU's memory: access L2/HBM, then answer (reads, writes) or apply.
void NvlinkHub::serve(PacketHandle h) {
  Sim& sim = ctx_.sim;
  Packet& p = sim.packets()[h];
  const bool mc = (p.addr & kMulticastBit) != 0;
  if (!mc && (p.addr >> kOwnerShift) != ctx_.rank)
    throw InvariantError(ctx_.name() + ": " + proto::PacketType_Name(p.type) + " for address owned by GPU " +
                         std::to_string(p.addr >> kOwnerShift));
  ++served_requests_;
  const TimePs now = sim.now();
  const TimePs l2_lat = ctx_.cfg.l2_latency_ps;
  switch (p.type) {
    case proto::PKT_READ_REQ:
    case proto::PKT_CAIS_LD_REQ:
    case proto::PKT_MM_LD_REDUCE_REQ: {
      const std::uint32_t bytes = p.type == proto::PKT_READ_REQ ? p.aux : p.count;
      ctx_.schedule(ctx_.mem->remote_read(now, bytes), kRespond, h);
      return;
    }
    case proto::PKT_WRITE: {
      ctx_.mem->remote_write(now, p.payload_bytes);
      if (p.tag & kFlagTag) ctx_.flags->add(p.addr & kOffsetMask, static_cast<std::int64_t>(p.count));
      else if (ctx_.functional) ctx_.fmem->apply_lines(p, false);
      ctx_.schedule(now + l2_lat, kRespond, h);
      return;
    }
    case proto::PKT_DMA: {  // a peer's DMA push, or a switch's copy of a multicast one
      const DmaOp op = dma_op(p.aux);
      if (op == DmaOp::kMulticastStore || op == DmaOp::kMulticastReduce)
        throw InvariantError(ctx_.name() + ": a multicast DMA push reached a GPU unreplicated (net.features needs nvls)");
      ctx_.mem->remote_write(now, p.payload_bytes);
      if (ctx_.functional) ctx_.fmem->apply_lines(p, op == DmaOp::kReduceCopy);
      const bool copy = p.origin >= sim.num_gpus();
      if (copy && !ctx_.ports->member_acks()) {  // the switch acked the issuer already
        sim.packets().release(h);
        return;
      }
      ctx_.schedule(now + l2_lat, kRespond, h);  // WRITE_ACK (unicast) or MM_ACK (member ack)
      return;
    }
    default: {  // CAIS_RED (merged sum), MM_ST / MM_RED (multicast copies)
      ctx_.mem->remote_write(now, p.payload_bytes);
      if (ctx_.functional) ctx_.fmem->apply_lines(p, p.type != proto::PKT_MM_ST);
      if (p.type == proto::PKT_CAIS_RED) ctx_.arrivals->landed(p);
      if (ctx_.ports->member_acks() && (p.type == proto::PKT_MM_ST || p.type == proto::PKT_MM_RED)) {
        ctx_.schedule(now + l2_lat, kRespond, h);  // MM_ACK to the issuer (NVLS member acks)
        return;
      }
      sim.packets().release(h);
      return;
    }
  }
}

void NvlinkHub::on_respond(PacketHandle h) {
  Sim& sim = ctx_.sim;
  const Packet& req = sim.packets()[h];  // pool slots never move, and h is released only below
  const PacketHandle r = sim.new_packet(ctx_.self);
  Packet& q = sim.packets()[r];
  q.src = ctx_.node;
  q.dst = req.src;
  q.origin = req.origin;
  q.addr = req.addr;
  q.tag = req.tag;
  q.group = req.group;
  q.aux = req.aux;
  q.count = req.count;
  q.inject_ps = req.inject_ps;
  q.copy_lines(req);  // an answer to a bulk request answers each of its lines
  switch (req.type) {
    case proto::PKT_READ_REQ: q.type = proto::PKT_READ_RESP; q.payload_bytes = req.aux; break;
    case proto::PKT_CAIS_LD_REQ: q.type = proto::PKT_CAIS_LD_RESP; q.payload_bytes = req.count; break;
    case proto::PKT_MM_LD_REDUCE_REQ: q.type = proto::PKT_MM_LD_REDUCE_RESP; q.payload_bytes = req.count; break;
    case proto::PKT_WRITE: q.type = proto::PKT_WRITE_ACK; q.payload_bytes = 0; break;
    case proto::PKT_MM_ST:
    case proto::PKT_MM_RED: q.type = proto::PKT_MM_ACK; q.payload_bytes = 0; q.count = 1; break;
    case proto::PKT_DMA:
      q.type = req.origin >= sim.num_gpus() ? proto::PKT_MM_ACK : proto::PKT_WRITE_ACK;
      q.payload_bytes = 0;
      q.count = 1;
      break;
    default: throw InvariantError("respond: not a request");
  }
  if (ctx_.functional && q.payload_bytes) ctx_.fmem->read_lines(req, q.payload_bytes, q.values);
  q.flits = ctx_.ports->flits(q.payload_bytes, q.lines);
  sim.packets().release(h);
  ctx_.ports->enqueue(r, req.hop_port, kResp);
}

}  // namespace cais::gpu
