// NVLS in the switch: multicast stores and reductions, ld_reduce, ack aggregation, DMA mode.
// The rules are stated in cais/net/feature_nvls.h.
#include "cais/net/feature_nvls.h"

#include <memory>
#include <sstream>

#include "cais/errors.h"
#include "cais/params.h"

namespace cais::net {

NvlsConfig NvlsConfig::from_params(const Params& p) {
  NvlsConfig c;
  c.multicast_delay_ps = feature_delay_ps(p, "net.nvls.multicast_delay_ns");
  c.reduce_delay_ps = feature_delay_ps(p, "net.nvls.reduce_delay_ns");
  c.member_acks = p.get_bool("net.nvls.member_acks");
  c.shape = PacketShape::from_params(p);
  return c;
}

Nvls::Nvls(const NvlsConfig& cfg, std::uint32_t switch_node) : cfg_(cfg), node_(switch_node) {}

std::uint32_t Nvls::group_base(SwitchContext& ctx, std::uint32_t src, std::uint32_t size) const {
  if (size == 0) throw InvariantError(ctx.name() + ": NVLS request from node " + std::to_string(src) + " with group size 0");
  const std::uint32_t base = src / size * size;
  if (base + size > ctx.num_gpus())
    throw InvariantError(ctx.name() + ": NVLS group [" + std::to_string(base) + ", " + std::to_string(base + size) +
                         ") exceeds the " + std::to_string(ctx.num_gpus()) + " GPUs");
  return base;
}

SwitchFeature::Verdict Nvls::on_arrival(SwitchContext& ctx, std::uint32_t /*in_port*/, PacketHandle h) {
  const Packet& p = ctx.packet(h);
  switch (p.type) {
    case proto::PKT_MM_ST:
    case proto::PKT_MM_RED:
      if (p.origin >= ctx.num_gpus()) return Verdict::kForward;  // a copy a switch made
      multicast(ctx, h, p.aux, p.aux);
      return Verdict::kConsumed;
    case proto::PKT_DMA: {
      if (p.origin >= ctx.num_gpus()) return Verdict::kForward;  // a copy a switch made
      const DmaOp op = dma_op(p.aux);
      const std::uint32_t n = dma_group_size(p.aux);
      if (op == DmaOp::kMulticastStore) {
        dma_multicasts_ += p.lines;
        multicast(ctx, h, n, dma_aux(DmaOp::kStoreCopy, n));
        return Verdict::kConsumed;
      }
      if (op == DmaOp::kMulticastReduce) {
        dma_multicasts_ += p.lines;
        multicast(ctx, h, n, dma_aux(DmaOp::kReduceCopy, n));
        return Verdict::kConsumed;
      }
      return Verdict::kForward;
    }
    case proto::PKT_MM_LD_REDUCE_REQ:
      ld_reduce(ctx, h);
      return Verdict::kConsumed;
    case proto::PKT_MM_ACK: return on_ack(ctx, h);
    case proto::PKT_READ_RESP: return on_read_resp(ctx, h);
    default: return Verdict::kForward;
  }
}

void Nvls::multicast(SwitchContext& ctx, PacketHandle h, std::uint32_t group_size, std::uint32_t copy_aux) {
  // The original is released once its copies are made (pool slots never move, so the
  // reference holds while they are created).
  const Packet& orig = ctx.packet(h);
  const std::uint32_t base = group_base(ctx, orig.src, group_size);
  const PairKey key{orig.src, orig.tag};
  if (acks_.count(key))
    throw InvariantError(ctx.name() + ": NVLS multicast from node " + std::to_string(orig.src) + " reuses tag " +
                         std::to_string(orig.tag) + " while its previous one is incomplete");
  for (std::uint32_t m = base; m < base + group_size; ++m) {
    const PacketHandle c = ctx.new_packet();
    Packet& q = ctx.packet(c);
    q.type = orig.type;
    q.src = orig.src;
    q.dst = m;
    q.addr = orig.addr;
    q.tag = orig.tag;
    q.group = orig.group;
    q.aux = copy_aux;
    q.count = 1;
    q.inject_ps = orig.inject_ps;
    q.origin = node_;
    q.payload_bytes = orig.payload_bytes;
    q.flits = orig.flits;
    q.copy_lines(orig);
    if (ctx.functional()) q.values = orig.values;
    ctx.inject_at_output(c, cfg_.multicast_delay_ps);
  }
  multicasts_ += orig.lines;
  copies_ += static_cast<std::uint64_t>(group_size) * orig.lines;
  if (cfg_.member_acks) {
    ack_nodes_.insert(acks_, key) = AckWait{group_size, group_size, orig.lines, orig.inject_ps};
  } else {
    send_ack(ctx, orig.src, orig.addr, orig.tag, group_size, orig.lines, orig.inject_ps, cfg_.multicast_delay_ps);
  }
  ctx.release(h);
}

void Nvls::send_ack(SwitchContext& ctx, std::uint32_t issuer, std::uint64_t addr, std::uint64_t tag,
                    std::uint32_t members, std::uint32_t lines, TimePs inject_ps, TimePs delay_ps) {
  const PacketHandle r = ctx.new_control_packet(proto::PKT_MM_ACK, node_, issuer, lines * cfg_.shape.flits(0));
  Packet& q = ctx.packet(r);
  q.addr = addr;
  q.tag = tag;
  q.count = members;
  q.inject_ps = inject_ps;
  q.lines = lines;  // one ack per line on the wire (the GPU counts its lines back)
  acks_sent_ += lines;
  ctx.inject_at_output(r, delay_ps);
}

SwitchFeature::Verdict Nvls::on_ack(SwitchContext& ctx, PacketHandle h) {
  const Packet& p = ctx.packet(h);
  if (p.src == node_) return Verdict::kForward;  // the aggregated ack itself
  auto it = acks_.find(PairKey{p.dst, p.tag});
  if (it == acks_.end()) return Verdict::kForward;
  const std::uint32_t issuer = p.dst;
  const std::uint64_t addr = p.addr, tag = p.tag;
  ctx.release(h);
  AckWait& w = it->second;
  if (--w.remaining > 0) return Verdict::kConsumed;
  const AckWait done = w;
  ack_nodes_.erase(acks_, it);
  send_ack(ctx, issuer, addr, tag, done.members, done.lines, done.inject_ps, 0);
  return Verdict::kConsumed;
}

void Nvls::ld_reduce(SwitchContext& ctx, PacketHandle h) {
  const Packet& orig = ctx.packet(h);  // released once the reads are made
  const std::uint32_t base = group_base(ctx, orig.src, orig.aux);
  if (orig.count == 0)
    throw InvariantError(ctx.name() + ": MM_LD_REDUCE_REQ without requested bytes (count) from node " +
                         std::to_string(orig.src));
  const std::uint64_t stag = kSwitchTagBit | (static_cast<std::uint64_t>(node_) << 40) | (next_tag_++ & ((1ull << 40) - 1));
  ReadWait& w = read_nodes_.insert(reads_, stag);
  w.requester = orig.src;
  w.remaining = w.members = orig.aux;
  w.group = orig.group;
  w.aux = orig.aux;
  w.payload_bytes = orig.count;
  w.addr = orig.addr;
  w.tag = orig.tag;
  w.inject_ps = orig.inject_ps;
  w.lines = orig.lines;
  w.more_lines = orig.more_lines;
  for (std::uint32_t m = base; m < base + orig.aux; ++m) {
    const PacketHandle c = ctx.new_packet();
    Packet& q = ctx.packet(c);
    q.type = proto::PKT_READ_REQ;
    q.src = orig.src;
    q.dst = m;
    q.addr = orig.addr;
    q.tag = stag;
    q.group = orig.group;
    q.aux = orig.count;    // bytes asked for: READ_REQ convention of the traffic model...
    q.count = orig.count;  // ...and of the collective model
    q.inject_ps = orig.inject_ps;
    q.origin = node_;
    q.payload_bytes = 0;
    q.flits = orig.flits;  // a read request as the requester sized its own
    q.copy_lines(orig);
    ctx.inject_at_output(c, cfg_.multicast_delay_ps);
    reads_sent_ += orig.lines;
  }
  ld_reduces_ += orig.lines;
  ctx.release(h);
}

SwitchFeature::Verdict Nvls::on_read_resp(SwitchContext& ctx, PacketHandle h) {
  const Packet& p = ctx.packet(h);
  if (!(p.tag & kSwitchTagBit)) return Verdict::kForward;
  auto it = reads_.find(p.tag);
  if (it == reads_.end()) return Verdict::kForward;
  ReadWait& w = it->second;
  w.resp_flits = p.flits;
  if (ctx.functional()) {
    if (w.remaining == w.members) {
      w.sum.assign(p.values.begin(), p.values.end());
    } else {
      if (p.values.size() != w.sum.size())
        throw InvariantError(ctx.name() + ": ld_reduce responses of different lengths for addr " +
                             std::to_string(w.addr));
      for (std::size_t i = 0; i < w.sum.size(); ++i) w.sum[i] += p.values[i];
    }
  }
  ctx.release(h);
  if (--w.remaining > 0) return Verdict::kConsumed;
  const PacketHandle r = ctx.new_packet();
  Packet& q = ctx.packet(r);
  q.type = proto::PKT_MM_LD_REDUCE_RESP;
  q.src = node_;
  q.dst = w.requester;
  q.addr = w.addr;
  q.tag = w.tag;
  q.group = w.group;
  q.aux = w.aux;
  q.count = w.members;
  q.inject_ps = w.inject_ps;
  q.origin = node_;
  q.payload_bytes = w.payload_bytes;
  q.flits = w.resp_flits;  // as the members sized their responses
  q.lines = w.lines;
  q.more_lines = w.more_lines;
  if (ctx.functional()) q.values.swap(w.sum);
  read_nodes_.erase(reads_, it);
  ctx.inject_at_output(r, cfg_.reduce_delay_ps);
  return Verdict::kConsumed;
}

void Nvls::register_stats(StatsRegistry& reg, const std::string& prefix) const {
  reg.counter(prefix + ".multicasts", "requests", &multicasts_);
  reg.counter(prefix + ".dma_multicasts", "requests", &dma_multicasts_);
  reg.counter(prefix + ".copies", "packets", &copies_);
  reg.counter(prefix + ".ld_reduces", "requests", &ld_reduces_);
  reg.counter(prefix + ".reads_sent", "packets", &reads_sent_);
  reg.counter(prefix + ".acks_sent", "packets", &acks_sent_);
}

void Nvls::check_drained() const {
  if (idle()) return;
  std::ostringstream os;
  os << "nvls at node " << node_ << ": " << acks_.size() << " multicasts waiting for member acks, " << reads_.size()
     << " ld_reduce operations waiting for member reads";
  throw InvariantError(os.str());
}

namespace {
const bool registered = [] {
  FeatureRegistry::instance().add("nvls", [](const FeatureArgs& a) {
    return std::make_unique<Nvls>(NvlsConfig::from_params(*a.params), a.switch_node);
  });
  return true;
}();
}  // namespace

}  // namespace cais::net
