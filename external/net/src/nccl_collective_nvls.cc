// NCCL collective model: NVLS (multimem.ld_reduce and multimem.st, and the member reads the
// switch asks for). What it models: nccl_collective_model.h.
#include "nccl_collective_model.h"

namespace cais::net::nccl_model {

void NcclCollectiveModel::nvls_issue(std::uint32_t c) {
  NvlsChan& ch = nvls_chans_[c];
  const auto& ranges = nvls_[c];
  while (ch.ri < ranges.size() && ch.inflight < nvls_outstanding_) {
    const NvlsRange& r = ranges[ch.ri];
    const std::uint64_t b = std::min<std::uint64_t>(bulk_bytes_, r.bytes - ch.ro);
    const PacketHandle h = make(proto::PKT_MM_LD_REDUCE_REQ, node_, kMulticastSpace | (r.offset + ch.ro), 0,
                                subpackets(b) * header_flits_, make_tag(c, kData, false, ++mm_seq_));
    Packet& p = sim_.packets()[h];
    p.aux = nranks_;                         // multicast group: GPUs [0, n)
    p.count = static_cast<std::uint32_t>(b);  // bytes to load
    ch.inflight += b;
    ch.ro += b;
    if (ch.ro == r.bytes) {
      ++ch.ri;
      ch.ro = 0;
    }
    enqueue(h, kReqVc);
  }
}

void NcclCollectiveModel::on_ld_reduce_resp(PacketHandle in) {
  const std::uint64_t tag = sim_.packets()[in].tag;
  const std::uint32_t c = tag_channel(tag);

       if (c >= nvls_chans_.size()) throw InvariantError(name() + ": ld_reduce response for unknown channel");
  const std::uint64_t b = sim_.packets()[in].payload_bytes;
  nvls_chans_[c].inflight -= b;
  nvls_loads_done_ += b;
  const std::uint64_t off = sim_.packets()[in].addr & kOffsetMask;
  // A multicast's tag must be unique while it is outstanding (the switch matches its acks).
  const PacketHandle h = make(proto::PKT_MM_ST, node_, kMulticastSpace | off, b, wire_flits(b),
                              make_tag(c, kData, false, ++mm_seq_));
  Packet& s = sim_.packets()[h];
  s.aux = nranks_;
  if (functional_) s.values = sim_.packets()[in].values;
  enqueue(h, kReqVc);
  nvls_issue(c);
  update_finish();
}

void NcclCollectiveModel::store_values(std::uint64_t off, const Packet& p) {

       if (p.values.size() * kElemBytes != p.payload_bytes) throw InvariantError(name() + ": NVLS packet without values");
  const std::uint64_t first = off / kElemBytes;
  for (std::size_t k = 0; k < p.values.size(); ++k) out_vals_[first + k] = p.values[k];
}

void NcclCollectiveModel::serve_read(PacketHandle in) {
  // The switch reads this GPU's copy of a multicast line (multimem.ld_reduce).
  const std::uint64_t b = sim_.packets()[in].count;
  const PacketHandle r = make(proto::PKT_READ_RESP, sim_.packets()[in].src, sim_.packets()[in].addr, b, wire_flits(b),
                              sim_.packets()[in].tag);
  const Packet& p = sim_.packets()[in];
  Packet& q = sim_.packets()[r];
  q.origin = p.origin;
  q.group = p.group;
  q.aux = p.aux;
  q.count = p.count;
  q.inject_ps = p.inject_ps;
  if (functional_) {
    const std::uint64_t first = (p.addr & kOffsetMask) / kElemBytes;
    for (std::uint64_t i = first; i < first + b / kElemBytes; ++i) q.values.push_back(input_value(node_, i));
  }
  reads_served_bytes_ += b;
  enqueue(r, resp_vc_);
}

}  // namespace cais::net::nccl_model
