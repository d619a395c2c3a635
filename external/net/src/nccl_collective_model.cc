// NCCL collective model (GPU model "collective"): setup, the GPU port's egress, arrivals and the
// end-of-run checks. What it models: nccl_collective_model.h.
#include "nccl_collective_model.h"

namespace cais::net::nccl_model {

NcclCollectiveModel::NcclCollectiveModel(Sim& sim, std::uint32_t node)
    : NodeComponent(sim, sim.node(node).name, node << 8), node_(node) {
  const Params& p = sim.params();
  op_ = parse_coll_op(p.get_string("collective.op"));
  algo_ = parse_coll_algo(p.get_string("collective.algo"));
  bytes_ = p.get_uint("collective.bytes");
  const auto ring_channels = p.get_uint("collective.channels");
  const auto nvls_channels = p.get_uint("collective.nvls_channels");
  channels_ = static_cast<std::uint32_t>(algo_ == CollAlgo::kNvls ? nvls_channels : ring_channels);
  const std::uint64_t chunk = p.get_uint("collective.chunk_bytes");
  const auto slices = static_cast<std::uint32_t>(p.get_uint("collective.slices_per_chunk"));
  slots_ = p.get_uint("collective.buffer_slices");
  const std::uint64_t nvls_chunk = p.get_uint("collective.nvls_chunk_bytes");
  nvls_outstanding_ = p.get_uint("collective.nvls_outstanding_bytes");
  packet_bytes_ = p.get_uint("collective.packet_bytes");
  const std::uint64_t multiple = p.get_uint("collective.packet_multiple");
  functional_ = p.get_bool("collective.functional");
  const double overhead_ns = p.get_double("collective.kernel_overhead_ns");
  if (overhead_ns < 0) throw ConfigError("collective.kernel_overhead_ns", "must be >= 0");
  if (!(overhead_ns <= Params::kMaxTimeNs)) throw ConfigError("collective.kernel_overhead_ns",
      "must be <= 1e12");
  p.get_time_ps("collective.start_ns");  // checked: >= 0 and not huge

                        start_ps_ = ns_to_ps(p.get_double("collective.start_ns") + (algo_ == CollAlgo::kRing ? overhead_ns : 0.0));
  init_prim_rates(p);
  writes_per_response_ = static_cast<std::uint32_t>(p.get_uint("collective.writes_per_response"));
  if (writes_per_response_ == 0) throw ConfigError("collective.writes_per_response",
      "must be >= 1");
  flit_bytes_ = static_cast<std::uint32_t>(p.get_uint("net.flit_bytes"));
  header_flits_ = static_cast<std::uint32_t>(p.get_uint("net.header_flits"));
  const VcLayout vc_layout = VcLayout::of(sim);
  const std::uint32_t vcs = vc_layout.vcs;
  const std::uint32_t depth = vc_layout.flits;  // the shallowest port's VC
  if (vcs < 2) throw ConfigError("net.vcs_per_port",
      "the collective GPU model needs >= 2 (requests, responses)");
  resp_vc_ = vcs / 2;  // requests in the lower half, responses in the upper (router VC classes)
  // Per-lane VC buffers (the paper's): spread each class over its VCs like the GPU hub. Per-port
  // buffers: one VC per class, the buffering the validation results were obtained with.
  class_vcs_ = vc_layout.per_lane ? std::array<std::uint32_t, 2>{vcs / 2, vcs - vcs / 2} : std::array<std::uint32_t, 2>{1, 1};
  member_acks_ = p.has("net.nvls.member_acks") && p.get_bool("net.nvls.member_acks");

       if (packet_bytes_ == 0 || packet_bytes_ % kElemBytes) throw ConfigError("collective.packet_bytes", "must be a positive multiple of 4");
  if (multiple == 0) throw ConfigError("collective.packet_multiple", "must be >= 1");
  if (slots_ == 0) throw ConfigError("collective.buffer_slices", "must be >= 1");

       if (algo_ == CollAlgo::kNvls && nvls_outstanding_ == 0) throw ConfigError("collective.nvls_outstanding_bytes", "must be > 0");
  if (channels_ == 0 || channels_ > 0xffff) throw ConfigError("collective.channels",
      "must be in 1..65535");
  bulk_bytes_ = packet_bytes_ * multiple;
  if (wire_flits(bulk_bytes_) > depth)
    throw ConfigError("collective.packet_multiple", "a bulk packet of " + std::to_string(wire_flits(bulk_bytes_)) +
                                                        " flits does not fit a VC of net.vc_depth_flits=" + std::to_string(depth));
  nranks_ = sim.num_gpus();
  if (nranks_ < 2) throw ConfigError("system.gpus", "a collective needs at least 2 GPUs");
  if (node_ >= nranks_) throw ConfigError("topology", "GPU node ids must be 0..G-1");

  if (algo_ == CollAlgo::kRing) {
    RingParams rp;
    rp.op = op_;
    rp.nranks = nranks_;
    rp.bytes = bytes_;
    rp.channels = channels_;
    rp.chunk_bytes = chunk;
    rp.slices_per_chunk = slices;
    rp.align_bytes = 16;
    ring_ = build_ring_schedule(rp, node_);
    space_bytes_ = ring_.space_bytes;
    shard_bytes_ = ring_.shard_bytes;
    chans_.resize(channels_);
    for (std::uint32_t c = 0; c < channels_; ++c) {
      std::uint64_t sends = 0, recvs = 0;
      for (const auto& o : ring_.channels[c]) {
        sends += prim_send(o.prim);
        recvs += prim_recv(o.prim);
      }
      chans_[c].tails.assign(recvs, 0);
      chans_[c].heads.assign(sends, 0);
    }
  } else {
    if (op_ != CollOp::kAllReduce) throw ConfigError("collective.algo", "nvls is modelled for all_reduce only");
    nvls_ = build_nvls_schedule(bytes_, nranks_, node_, channels_, nvls_chunk, 16);
    space_bytes_ = shard_bytes_ = bytes_;
    nvls_chans_.resize(channels_);
    for (std::uint32_t c = 0; c < channels_; ++c)
      for (const auto& r : nvls_[c]) nvls_load_total_ += r.bytes;
  }
  if (functional_) {
    const std::uint64_t elems = space_bytes_ / kElemBytes;
    if (space_bytes_ % kElemBytes) throw ConfigError("collective.bytes", "functional mode needs a multiple of 4 bytes");
    if (elems > (1ull << 26)) throw ConfigError("collective.functional", "functional mode is for small sizes (<= 256 MB)");
    out_vals_.assign(elems, std::nan(""));
    if (algo_ == CollAlgo::kRing) {
      rs_in_.assign(elems, std::nan(""));
      ag_in_.assign(elems, std::nan(""));
    }
  }

  rng_weights(sim, vc_layout);
  const std::string pre = name() + ".collective";
  sim.stats().value(pre + ".finish_time", "ps", [this] { return static_cast<double>(finish_ps_); });
  // The channel that finished first: with finish_time, how unevenly the channels progressed.
  sim.stats().value(pre + ".first_channel_done", "ps", [this] {
    return chan_done_first_ps_ == kNever ? 0.0 : static_cast<double>(chan_done_first_ps_);
  });
  sim.stats().counter(pre + ".data_tx_bytes", "B", &data_tx_bytes_);
  sim.stats().counter(pre + ".data_rx_bytes", "B", &data_rx_bytes_);
  sim.stats().counter(pre + ".flags_tx", "packets", &flags_tx_);
  sim.stats().counter(pre + ".ld_reduce_bytes", "B", &nvls_loads_done_);
  sim.stats().counter(pre + ".multicast_rx_bytes", "B", &mc_rx_bytes_);
  sim.stats().counter(pre + ".reads_served_bytes", "B", &reads_served_bytes_);
  sim.stats().counter(pre + ".wait_data_ps", "ps", &wait_data_ps_);
  sim.stats().counter(pre + ".wait_slot_ps", "ps", &wait_slot_ps_);
  sim.stats().counter(pre + ".fence_ps", "ps", &fence_ps_);
  // How long write responses spend in the network (a fence waits for the slowest of a slice's).
  sim.stats().histogram(pre + ".write_ack_latency", "ns", &ack_latency_ns_);
  sim.stats().counter(pre + ".functional_checked", "elements", &checked_);
  sim.stats().counter(pre + ".functional_errors", "elements", &errors_);
  schedule(start_ps_, kStart);
}

void NcclCollectiveModel::handle(const Event& e) {
  switch (e.kind) {
    case kPacketArrival: return on_arrival(static_cast<PacketHandle>(e.arg));
    case kPortFree: return pump(e.arg32);
    case kCtaStep: return cta_step(e.arg32);
    case kStart:
      if (algo_ == CollAlgo::kRing)
        for (std::uint32_t c = 0; c < channels_; ++c) ring_advance(c);
      else
        for (std::uint32_t c = 0; c < channels_; ++c) nvls_issue(c);
      update_finish();
      return;
    default: throw InvariantError(name() + ": unknown event");
  }
}

std::string NcclCollectiveModel::blocked_reason() const {
  if (finished_) return {};
  std::ostringstream os;
  if (algo_ == CollAlgo::kRing) {
    for (std::uint32_t c = 0; c < channels_; ++c) {
      const auto& ch = chans_[c];
      if (ch.pc < ring_.channels[c].size()) {
        os << "channel " << c << " at slice " << ch.pc << "/" << ring_.channels[c].size() << " (tails " << ch.tail_contig
           << ", heads " << ch.head_contig << ", sent " << ch.send_idx << ", unacked " << ch.unacked
           << (ch.posting ? ", fencing" : "") << ")";
        return os.str();
      }
    }
    os << "acks outstanding: " << unacked_total_;
  } else {
    os << "ld_reduce " << nvls_loads_done_ << "/" << nvls_load_total_ << " B, multicast received " << mc_rx_bytes_ << "/"
       << bytes_ << " B";
  }
  return os.str();
}

void NcclCollectiveModel::check_drained() const {
  for (const auto& o : out_)
    if (o.connected() && !o.all_credits_home()) throw InvariantError(name() + ": credits not returned at end of run");
  if (!finished_) throw InvariantError(name() + ": collective incomplete: " + blocked_reason());
}

void NcclCollectiveModel::rng_weights(Sim& sim, const VcLayout& vcs) {
  planes_ = init_endpoint_ports(sim, node_, name(), vcs, flit_bytes_, out_, in_);
  queues_.resize(out_.size());
  next_vc_.assign(out_.size(), {0, 0});
}

// Flits of `payload` bytes sent as ceil(payload / packet_bytes) NVLink packets.
std::uint32_t NcclCollectiveModel::wire_flits(std::uint64_t payload) const {
  if (payload == 0) return header_flits_;
  const std::uint64_t full = payload / packet_bytes_, rest = payload % packet_bytes_;
  std::uint64_t f = full * flits_for(static_cast<std::uint32_t>(packet_bytes_), flit_bytes_,
                                     header_flits_);
  if (rest) f += flits_for(static_cast<std::uint32_t>(rest), flit_bytes_, header_flits_);
  return static_cast<std::uint32_t>(f);
}

std::uint32_t NcclCollectiveModel::subpackets(std::uint64_t payload) const {
  return static_cast<std::uint32_t>(std::max<std::uint64_t>(1,
                                    (payload + packet_bytes_ - 1) / packet_bytes_));
}

PacketHandle NcclCollectiveModel::make(PacketType t, std::uint32_t dst, std::uint64_t addr,
                                       std::uint64_t payload, std::uint32_t flits, std::uint64_t tag) {
  const PacketHandle h = sim_.new_packet(*this);
  Packet& p = sim_.packets()[h];
  p.type = t;
  p.src = node_;
  p.dst = dst;
  p.addr = addr;
  p.payload_bytes = static_cast<std::uint32_t>(payload);
  p.flits = flits;
  p.tag = tag;
  p.inject_ps = sim_.now();
  return h;
}

// Requests of all channels share one FIFO per port, in issue order; responses have their own.
void NcclCollectiveModel::enqueue(PacketHandle h, std::uint32_t vc) {
  const std::uint32_t port = planes_.plane(sim_.packets()[h].addr);
  queues_[port][vc == kReqVc ? 0 : 1].push_back(h);
  pump(port);
}

void NcclCollectiveModel::pump(std::uint32_t port) {
  OutputChannel& ch = out_[port];
  if (!ch.idle_at(sim_.now())) return;  // a kPortFree event is pending
  auto& resp = queues_[port][1];
  const std::int32_t rvc = resp.empty() ? -1 : pick_vc(port, 1, sim_.packets()[resp.front()].flits);
  if (rvc >= 0) {
    const PacketHandle h = resp.front();
    resp.pop_front();
    schedule(ch.transmit(sim_, *this, h, static_cast<std::uint32_t>(rvc)), kPortFree, 0, port);
    return;
  }
  auto& req = queues_[port][0];
  if (req.empty()) return;
  const PacketHandle h = req.front();
  const std::int32_t vc = pick_vc(port, 0, sim_.packets()[h].flits);
  if (vc < 0) return;
  req.pop_front();
  schedule(ch.transmit(sim_, *this, h, static_cast<std::uint32_t>(vc)), kPortFree, 0, port);
}

// The next VC of class `cls` (0 requests, 1 responses) with credits for `flits`, round robin
// over the class's VCs; -1 if none (a credit return pumps the port again).
std::int32_t NcclCollectiveModel::pick_vc(std::uint32_t port, std::uint32_t cls,
                                          std::uint32_t flits) {
  const std::uint32_t first = cls ? resp_vc_ : kReqVc, count = class_vcs_[cls];
  std::uint32_t& next = next_vc_[port][cls];
  for (std::uint32_t i = 0; i < count; ++i) {
    const std::uint32_t vc = first + (next + i) % count;
    if (out_[port].has_credits(vc, flits)) {
      next = (next + i + 1) % count;
      return static_cast<std::int32_t>(vc);
    }
  }
  return -1;
}

double NcclCollectiveModel::result_val(Prim prim, std::uint64_t i) const {
  switch (prim) {
    case Prim::kSend:
    case Prim::kCopySend: return input_value(node_, i);
    case Prim::kRecvReduceSend:
    case Prim::kRecvReduceCopySend:
    case Prim::kRecvReduceCopy: return rs_in_[i] + input_value(node_, i);
    default: return ag_in_[i];
  }
}

double NcclCollectiveModel::expected(std::uint64_t i) const {

       if (op_ == CollOp::kAllGather) return input_value(static_cast<std::uint32_t>(i * kElemBytes / shard_bytes_), i);
  double s = 0;
  for (std::uint32_t r = 0; r < nranks_; ++r) s += input_value(r, i);
  return s;
}

// Note: allocating a packet may move the pool, so no Packet& is held across new_packet().
void NcclCollectiveModel::on_arrival(PacketHandle h) {
  const std::uint32_t port = sim_.packets()[h].hop_port;
  if (sim_.packets()[h].type == proto::PKT_CREDIT) {
    const Packet& p = sim_.packets()[h];
    out_[port].return_credits(p.vc, p.count);
    sim_.packets().release(h);
    pump(port);
    return;
  }
  in_[port].accept(sim_, h);
  in_[port].pop(sim_, *this, sim_.packets()[h].vc);  // the GPU sinks packets at line rate
  const PacketType type = sim_.packets()[h].type;
  switch (type) {
    case proto::PKT_WRITE: {
      const Packet& p = sim_.packets()[h];
      const std::uint32_t src = p.src;
      const std::uint64_t addr = p.addr, tag = p.tag;
      // One response flit per writes_per_response packets (subpackets() is >= 1).
      const std::uint32_t flits =
          (subpackets(p.payload_bytes) + writes_per_response_ - 1) / writes_per_response_ * header_flits_;
      on_write(h);
      enqueue(make(proto::PKT_WRITE_ACK, src, addr, 0, flits, tag), resp_vc_);
      break;
    }
    case proto::PKT_WRITE_ACK:
      ack_latency_ns_.add(static_cast<double>(sim_.now() - sim_.packets()[h].inject_ps) / 1000.0);
      on_write_ack(sim_.packets()[h].tag);
      break;
    case proto::PKT_READ_REQ: serve_read(h); break;
    case proto::PKT_MM_LD_REDUCE_RESP: on_ld_reduce_resp(h); break;
    case proto::PKT_MM_ST: {
      const Packet& p = sim_.packets()[h];
      mc_rx_bytes_ += p.payload_bytes;
      if (functional_) store_values(p.addr & kOffsetMask, p);
      if (member_acks_) {  // NVLS completion at memory: the member acks its copy
        const std::uint32_t src = p.src;
        const std::uint64_t addr = p.addr, tag = p.tag;
        const PacketHandle a = make(proto::PKT_MM_ACK, src, addr, 0, header_flits_, tag);
        enqueue(a, resp_vc_);
      }
      update_finish();
      break;
    }
    case proto::PKT_MM_ACK: break;
    default: throw InvariantError(name() + ": unexpected packet type " + proto::PacketType_Name(type));
  }
  sim_.packets().release(h);
}

void NcclCollectiveModel::update_finish() {
  if (finished_) return;
  if (algo_ == CollAlgo::kRing) {
    if (unacked_total_ != 0) return;
    for (std::uint32_t c = 0; c < channels_; ++c)
      if (chans_[c].pc < ring_.channels[c].size() || chans_[c].posting) return;
  } else {
    if (nvls_loads_done_ != nvls_load_total_) return;
    if (mc_rx_bytes_ != bytes_) return;
  }
  finished_ = true;
  finish_ps_ = sim_.now();
  if (functional_) verify();
}

void NcclCollectiveModel::verify() {
  std::uint64_t lo = 0, hi = space_bytes_ / kElemBytes;
  if (op_ == CollOp::kReduceScatter) {
    lo = node_ * shard_bytes_ / kElemBytes;
    hi = lo + shard_bytes_ / kElemBytes;
  }
  for (std::uint64_t i = lo; i < hi; ++i) {
    ++checked_;
    if (!(out_vals_[i] == expected(i))) ++errors_;
  }
}

}  // namespace cais::net::nccl_model

namespace cais::net {
namespace {
const bool registered = [] {
  NodeFactory f;
  f.engine = "gpu";
  f.param_prefixes = {"collective."};
  f.build = [](Sim& sim, std::uint32_t node) { return std::make_unique<nccl_model::NcclCollectiveModel>(sim, node); };
  NodeRegistry::instance().add(proto::NODE_GPU, "collective", std::move(f));
  return true;
}();
}  // namespace
}  // namespace cais::net
