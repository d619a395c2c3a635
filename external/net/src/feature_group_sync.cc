// The CAIS group-sync table: count SYNC_REQ per group, broadcast SYNC_RELEASE when complete.
#include "cais/net/feature_group_sync.h"

#include <algorithm>
#include <memory>
#include <sstream>

#include "cais/errors.h"
#include "cais/params.h"

namespace cais::net {

GroupSyncConfig GroupSyncConfig::from_params(const Params& p) {
  GroupSyncConfig c;
  c.process_delay_ps = feature_delay_ps(p, "net.group_sync.process_delay_ns");
  c.table_entries = static_cast<std::uint32_t>(p.get_uint("net.group_sync.table_entries"));
  if (c.table_entries == 0) throw ConfigError("net.group_sync.table_entries", "must be >= 1");
  c.shape = PacketShape::from_params(p);
  return c;
}

GroupSync::GroupSync(const GroupSyncConfig& cfg, std::uint32_t switch_node) : cfg_(cfg), node_(switch_node) {}

SwitchFeature::Verdict GroupSync::on_arrival(SwitchContext& ctx, std::uint32_t /*in_port*/, PacketHandle h) {
  const Packet& p = ctx.packet(h);
  // The group's table lives in the switch the request is addressed to (in a multi-level fabric
  // the GPUs of a group must all address one switch; the ones on the way pass it on).
  if (p.type != proto::PKT_SYNC_REQ || p.dst != ctx.node_id()) return Verdict::kForward;
  const std::uint32_t gid = p.group, expected = p.aux;
  const Registrant r{p.src, p.tag};
  if (expected == 0)
    throw InvariantError(ctx.name() + ": SYNC_REQ for group " + std::to_string(gid) + " expects 0 members");
  ctx.release(h);
  ++requests_;
  auto it = groups_.find(gid);
  if (it == groups_.end()) {
    if (groups_.size() >= cfg_.table_entries)
      throw InvariantError(ctx.name() + ": group-sync table full (" + std::to_string(cfg_.table_entries) +
                           " groups pending; raise net.group_sync.table_entries)");
    it = groups_.emplace(gid, Group{}).first;
    it->second.expected = expected;
    it->second.first_ps = ctx.now();
    high_water_groups_ = std::max<std::uint64_t>(high_water_groups_, groups_.size());
  } else if (it->second.expected != expected) {
    throw InvariantError(ctx.name() + ": SYNC_REQ for group " + std::to_string(gid) + " expects " +
                         std::to_string(expected) + " members, earlier ones " + std::to_string(it->second.expected));
  }
  Group& g = it->second;
  g.regs.push_back(r);
  if (g.regs.size() < g.expected) return Verdict::kConsumed;
  wait_ns_.add(static_cast<double>(ctx.now() - g.first_ps) / 1000.0);
  const std::vector<Registrant> regs = std::move(g.regs);
  groups_.erase(it);
  for (const Registrant& reg : regs) {
    const PacketHandle c = ctx.new_packet();
    Packet& q = ctx.packet(c);
    q.type = proto::PKT_SYNC_RELEASE;
    q.src = node_;
    q.dst = reg.src;
    q.group = gid;
    q.tag = reg.tag;
    q.aux = expected;
    q.count = static_cast<std::uint32_t>(regs.size());
    q.inject_ps = ctx.now();
    q.origin = node_;
    q.payload_bytes = 0;
    q.flits = cfg_.shape.flits(0);
    ctx.inject_at_output(c, cfg_.process_delay_ps);
    ++releases_;
  }
  ++groups_released_;
  return Verdict::kConsumed;
}

void GroupSync::register_stats(StatsRegistry& reg, const std::string& prefix) const {
  reg.counter(prefix + ".requests", "packets", &requests_);
  reg.counter(prefix + ".releases", "packets", &releases_);
  reg.counter(prefix + ".groups_released", "groups", &groups_released_);
  reg.counter(prefix + ".high_water_groups", "groups", &high_water_groups_);
  reg.histogram(prefix + ".wait", "ns", &wait_ns_);
}

void GroupSync::check_drained() const {
  if (groups_.empty()) return;
  std::ostringstream os;
  os << "group_sync at node " << node_ << ": " << groups_.size() << " groups never released";
  const auto& g = *groups_.begin();
  os << " (e.g. group " << g.first << ": " << g.second.regs.size() << " of " << g.second.expected << " registered)";
  throw InvariantError(os.str());
}

namespace {
const bool registered = [] {
  FeatureRegistry::instance().add("group_sync", [](const FeatureArgs& a) {
    return std::make_unique<GroupSync>(GroupSyncConfig::from_params(*a.params), a.switch_node);
  });
  return true;
}();
}  // namespace

}  // namespace cais::net
