#include "cais/packet.h"

namespace cais {

void Packet::to_proto(proto::Packet* out) const {
  out->set_id(id);
  out->set_type(type);
  out->set_src(src);
  out->set_dst(dst);
  out->set_hop_dst(hop_dst);
  out->set_hop_port(hop_port);
  out->set_vc(vc);
  out->set_arrival_ps(arrival_ps);
  out->set_addr(addr);
  out->set_payload_bytes(payload_bytes);
  out->set_flits(flits);
  out->set_group(group);
  out->set_tag(tag);
  out->set_inject_ps(inject_ps);
  out->set_origin(origin);
  out->set_count(count);
  out->set_aux(aux);
  out->set_hop_key(hop_key);
  out->set_tail_ps(tail_ps);
  if (!values.empty()) out->mutable_values()->Add(values.begin(), values.end());
  if (lines > 1) {
    out->set_lines(lines);
    out->mutable_more_lines()->Add(more_lines.begin(), more_lines.begin() + (lines - 1));
  }
}

void Packet::from_proto(const proto::Packet& in) {
  id = in.id();
  type = in.type();
  src = in.src();
  dst = in.dst();
  hop_dst = in.hop_dst();
  hop_port = in.hop_port();
  vc = in.vc();
  arrival_ps = in.arrival_ps();
  addr = in.addr();
  payload_bytes = in.payload_bytes();
  flits = in.flits();
  group = in.group();
  tag = in.tag();
  inject_ps = in.inject_ps();
  origin = in.origin();
  count = in.count();
  aux = in.aux();
  hop_key = in.hop_key();
  tail_ps = in.tail_ps();
  values.assign(in.values().begin(), in.values().end());
  lines = in.lines() ? in.lines() : 1;
  more_lines = {};
  for (int i = 0; i < in.more_lines_size() && i < static_cast<int>(kMaxBulkLines) - 1; ++i) more_lines[i] = in.more_lines(i);
}

}  // namespace cais
