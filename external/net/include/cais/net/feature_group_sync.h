// The CAIS group-sync table (III-B2/3), as switch feature "group_sync".
//
// SYNC_REQ (dst = this switch, group = TB-group id, aux = members expected, tag = the GPU
// synchronizer's tag) registers its sender in the table entry of its group; a SYNC_REQ
// addressed to another switch passes through (in a multi-level fabric all GPUs of a group must
// address the same switch, e.g. one chosen by the group id; in a DGX-style system the switch
// of plane PlaneHash::plane_for_key(group)). When `aux` registrations are in, the
// switch sends every registered GPU a SYNC_RELEASE (group, tag of its request, aux, count =
// registrations) and frees the entry, so the group id can be used again. All requests of one
// group must name the same `aux`. Sync packets of a group all reach one switch
// (PlaneHash::plane_for_key(group)). The table holds at most `table_entries` groups at once;
// more is a configuration error reported loudly (the GPU side bounds active groups). The
// releases enter the crossbar at their outputs (SwitchContext::inject_at_output), as every
// packet a switch feature makes does, not at the registrants' input ports.
#pragma once
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "cais/net/feature_util.h"
#include "cais/net/switch_feature.h"
#include "cais/stats.h"

namespace cais::net {

struct GroupSyncConfig {
  TimePs process_delay_ps = 0;
  std::uint32_t table_entries = 0;
  PacketShape shape;
  static GroupSyncConfig from_params(const Params& p);
};

class GroupSync : public SwitchFeature {
 public:
  GroupSync(const GroupSyncConfig& cfg, std::uint32_t switch_node);

  Verdict on_arrival(SwitchContext& ctx, std::uint32_t in_port, PacketHandle h) override;
  void register_stats(StatsRegistry& reg, const std::string& prefix) const override;
  void check_drained() const override;
  bool idle() const override { return groups_.empty(); }

  std::uint64_t requests() const { return requests_; }
  std::uint64_t releases_sent() const { return releases_; }
  std::uint64_t groups_released() const { return groups_released_; }
  std::size_t pending_groups() const { return groups_.size(); }

 private:
  struct Registrant {
    std::uint32_t src = 0;
    std::uint64_t tag = 0;
  };
  struct Group {
    std::uint32_t expected = 0;
    TimePs first_ps = 0;
    std::vector<Registrant> regs;
  };

  GroupSyncConfig cfg_;
  std::uint32_t node_;
  std::unordered_map<std::uint32_t, Group> groups_;
  std::uint64_t requests_ = 0, releases_ = 0, groups_released_ = 0, high_water_groups_ = 0;
  Histogram wait_ns_;  // first to last registration of a group
};

}  // namespace cais::net
