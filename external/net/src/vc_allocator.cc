#include "cais/net/vc_allocator.h"

#include "cais/errors.h"

namespace cais::net {

VcClass vc_class_of(PacketType t, bool traffic_control) {
  switch (t) {
    case proto::PKT_READ_RESP:
    case proto::PKT_WRITE_ACK:
    case proto::PKT_CAIS_LD_RESP:
    case proto::PKT_CAIS_RED_ACK:
    case proto::PKT_MM_LD_REDUCE_RESP:
    case proto::PKT_MM_ACK:
    case proto::PKT_SYNC_RELEASE:
    case proto::PKT_THROTTLE:
      return VcClass::kResponse;
    case proto::PKT_READ_REQ:
    case proto::PKT_CAIS_LD_REQ:
    case proto::PKT_MM_LD_REDUCE_REQ:
    case proto::PKT_SYNC_REQ:
      return traffic_control ? VcClass::kLoad : VcClass::kRequest;
    case proto::PKT_WRITE:
    case proto::PKT_CAIS_RED:
    case proto::PKT_MM_RED:
    case proto::PKT_MM_ST:
    case proto::PKT_DMA:
      return traffic_control ? VcClass::kReduction : VcClass::kRequest;
    default:
      return VcClass::kAny;  // synthetic traffic: one class, every VC
  }
}

bool is_control_packet(PacketType t) {
  return t == proto::PKT_THROTTLE || t == proto::PKT_SYNC_RELEASE || t == proto::PKT_CAIS_RED_ACK;
}

VcRange vc_range(VcClass c, std::uint32_t vcs, bool traffic_control) {
  const VcSplit s = vc_split(vcs, traffic_control);  // validates the VC count
  switch (c) {
    case VcClass::kAny: return {0, vcs};
    case VcClass::kResponse: return s.response;
    case VcClass::kLoad: return s.load;
    case VcClass::kReduction: return s.reduction;
    default: return s.request;
  }
}

void VcAllocator::init(std::uint32_t num_ports, std::uint32_t vcs, bool traffic_control, std::uint32_t num_inputs) {
  num_ports_ = num_ports;
  num_inputs_ = num_inputs ? num_inputs : num_ports;
  vcs_ = vcs;
  tc_ = traffic_control;
  vc_split(vcs, traffic_control);  // validates the VC count
  for (std::size_t t = 0; t < kPacketTypes; ++t)
    range_by_type_[t] = vc_range(vc_class_of(static_cast<PacketType>(t), tc_), vcs_, tc_);
  if (vcs > 64) throw ConfigError("net.vcs_per_port", "at most 64 VCs per port");
  held_.assign(num_ports, 0);
  rr_.assign(static_cast<std::size_t>(num_ports) * 5, 0);
  waiters_.assign(num_ports, {});
  waiting_.assign(static_cast<std::size_t>(num_ports) * num_inputs_ * (vcs + 1), 0);
}

std::int32_t VcAllocator::allocate(std::uint32_t out_port, const OutputChannel& ch, PacketType type,
                                   std::uint32_t flits) {
  const VcClass c = vc_class_of(type, tc_);
  const VcRange r = range_of(type);
  std::uint32_t& rr = rr_[out_port * 5 + static_cast<std::uint32_t>(c)];
  for (std::uint32_t i = 0; i < r.count; ++i) {
    const std::uint32_t off = (rr + i) % r.count;
    const std::uint32_t vc = r.first + off;
    if (held(out_port, vc) || !ch.has_credits(vc, flits)) continue;
    take(out_port, vc);
    rr = (off + 1) % r.count;
    return static_cast<std::int32_t>(vc);
  }
  return -1;
}

std::uint32_t VcAllocator::held_count() const {
  std::uint32_t n = 0;
  for (std::uint64_t h : held_) n += static_cast<std::uint32_t>(__builtin_popcountll(h));
  return n;
}

void VcAllocator::wait(std::uint32_t out_port, std::uint32_t in_port, std::uint32_t in_vc) {
  std::uint8_t& w = waiting_[(static_cast<std::size_t>(out_port) * num_inputs_ + in_port) * (vcs_ + 1) + in_vc];
  if (w) return;
  w = 1;
  waiters_[out_port].emplace_back(in_port, in_vc);
}

void VcAllocator::take_waiters(std::uint32_t out_port, std::vector<std::pair<std::uint32_t, std::uint32_t>>& out) {
  out.clear();
  out.swap(waiters_[out_port]);
  for (const auto& w : out)
    waiting_[(static_cast<std::size_t>(out_port) * num_inputs_ + w.first) * (vcs_ + 1) + w.second] = 0;
}

}  // namespace cais::net
