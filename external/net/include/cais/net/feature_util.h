// Small helpers shared by the switch features (NVLS, CAIS merge unit, group sync).
//
// Packet conventions the features rely on (beyond docs/CONTRACTS.md), in one place:
//   - A packet a feature creates carries origin = the switch's node id, so that GPUs and later
//     features can tell switch-generated traffic from requests.
//   - Requests that ask for data and use `aux` for the group size (CAIS_LD_REQ,
//     MM_LD_REDUCE_REQ) carry the bytes they ask for in `count` (plain READ_REQ uses `aux`).
//   - Reads a switch generates (NVLS ld_reduce) carry tags with bit 63 set and the switch's
//     node id; a READ_RESP is taken only if its tag is one the switch still waits for.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "cais/errors.h"
#include "cais/packet.h"
#include "cais/params.h"
#include "cais/routing.h"
#include "cais/time.h"

namespace cais::net {

inline constexpr std::uint64_t kSwitchTagBit = 1ull << 63;

// Flit geometry of the links (the router's keys; every feature that creates packets reads them).
struct PacketShape {
  std::uint32_t flit_bytes = 16;
  std::uint32_t header_flits = 1;
  static PacketShape from_params(const Params& p) {
    PacketShape s;
    s.flit_bytes = static_cast<std::uint32_t>(p.get_uint("net.flit_bytes"));
    s.header_flits = static_cast<std::uint32_t>(p.get_uint("net.header_flits"));
    if (s.flit_bytes == 0) throw ConfigError("net.flit_bytes", "must be >= 1");
    return s;
  }
  std::uint32_t flits(std::uint32_t payload_bytes) const {
    return flits_for(payload_bytes, flit_bytes, header_flits);
  }
};

// A delay given in nanoseconds, >= 0, as picoseconds.
inline TimePs feature_delay_ps(const Params& p, const std::string& key) {
  return p.get_time_ps(key);
}

// Hash for (a, b) keys of feature tables.
struct PairKey {
  std::uint64_t a = 0, b = 0;
  bool operator==(const PairKey& o) const { return a == o.a && b == o.b; }
};
struct PairKeyHash {
  std::size_t operator()(const PairKey& k) const {
    return static_cast<std::size_t>(mix64(k.a ^ mix64(k.b)));
  }
};

// A node-based map (std::unordered_map) whose erased nodes are kept for the next insert, so a
// table that stays near one size allocates nothing per entry once warm (an NVLS multicast or
// ld_reduce is an entry each: per packet otherwise).
template <class Map>
class RecycledNodes {
 public:
  // The entry of `key`, a fresh value (key must not be in `map`).
  typename Map::mapped_type& insert(Map& map, const typename Map::key_type& key) {
    if (spare_.empty()) return map.try_emplace(key).first->second;
    typename Map::node_type node = std::move(spare_.back());
    spare_.pop_back();
    node.key() = key;
    node.mapped() = typename Map::mapped_type{};
    return map.insert(std::move(node)).position->second;
  }
  void erase(Map& map, typename Map::iterator it) { spare_.push_back(map.extract(it)); }

 private:
  std::vector<typename Map::node_type> spare_;
};

}  // namespace cais::net
