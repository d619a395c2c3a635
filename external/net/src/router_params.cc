#include "cais/net/router_params.h"

#include <sstream>

#include "cais/errors.h"
#include "cais/params.h"

namespace cais::net {

namespace {
TimePs delay_ps(const Params& p, const std::string& key) {
  const double ns = p.get_double(key);
  if (ns < 0) throw ConfigError(key, "must be >= 0 ns");
  return ns_to_ps(ns);
}

std::vector<std::string> split_features(const std::string& s) {
  std::vector<std::string> out;
  std::string cur;
  std::istringstream is(s);
  while (std::getline(is, cur, ',')) {
    const auto b = cur.find_first_not_of(" \t");
    if (b == std::string::npos) continue;
    const auto e = cur.find_last_not_of(" \t");
    out.push_back(cur.substr(b, e - b + 1));
  }
  return out;
}
}  // namespace

RouterParams RouterParams::from(const Sim& sim) {
  const Params& p = sim.params();
  RouterParams r;
  r.vcs = VcLayout::of(sim);
  r.flit_bytes = static_cast<std::uint32_t>(p.get_uint("net.flit_bytes"));
  r.header_flits = static_cast<std::uint32_t>(p.get_uint("net.header_flits"));
  r.routing_ps = delay_ps(p, "net.routing_delay_ns");
  r.vc_alloc_ps = delay_ps(p, "net.vc_alloc_delay_ns");
  r.sw_alloc_ps = delay_ps(p, "net.sw_alloc_delay_ns");
  r.xbar_ps = delay_ps(p, "net.xbar_delay_ns");
  r.credit_ps = delay_ps(p, "net.credit_delay_ns");
  r.stats_bin_ps = p.get_time_ps("net.stats_bin_ns", 1000);  // every packet fills its bins one by one
  r.sw_alloc_patience = static_cast<std::uint32_t>(p.get_uint("net.sw_alloc_patience"));
  r.internal_speedup = p.has("net.internal_speedup") ? static_cast<std::uint32_t>(p.get_uint("net.internal_speedup")) : 1;
  if (r.internal_speedup < 1 || r.internal_speedup > 4)
    throw ConfigError("net.internal_speedup", "must be 1 to 4, got " + std::to_string(r.internal_speedup));
  r.output_queue_flits = p.has("net.output_queue_flits")
                             ? static_cast<std::uint32_t>(p.get_uint("net.output_queue_flits"))
                             : 0;
  r.flit_level = p.has("net.sw_alloc_granularity") &&
                 p.get_enum("net.sw_alloc_granularity", {"packet", "flit"}) == "flit";
  if (r.flit_level && r.output_queue_flits)
    throw ConfigError("net.sw_alloc_granularity",
                      "flit allocation interleaves flits itself: use it with net.output_queue_flits=0");
  r.traffic_control = p.get_bool("net.traffic_control");
  r.functional = p.get_bool("net.functional");
  r.features = split_features(p.get_string("net.features"));
  if (r.flit_bytes == 0) throw ConfigError("net.flit_bytes", "must be >= 1");
  return r;
}

const std::vector<std::string>& harness_only_net_keys() {
  static const std::vector<std::string> keys{"net.booksim_config", "net.injection_rates"};
  return keys;
}

}  // namespace cais::net
