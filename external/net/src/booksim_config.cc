#include "cais/net/booksim_config.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <utility>

#include "cais/errors.h"

namespace cais::net {

namespace {

// The read/write request-reply scheme's integer keys with BookSim's defaults (write_fraction is
// the one double): BookSim reads them only with use_read_write = 1, which is not modelled, so
// any value of their type is accepted.
constexpr std::pair<const char*, const char*> kReadWriteIntKeys[] = {
    {"read_request_begin_vc", "0"}, {"read_request_end_vc", "5"},   {"write_request_begin_vc", "2"},
    {"write_request_end_vc", "7"},  {"read_reply_begin_vc", "8"},   {"read_reply_end_vc", "13"},
    {"write_reply_begin_vc", "10"}, {"write_reply_end_vc", "15"},   {"read_request_subnet", "0"},
    {"read_reply_subnet", "0"},     {"write_request_subnet", "0"},  {"write_reply_subnet", "0"},
    {"read_request_size", "1"},     {"write_request_size", "1"},    {"read_reply_size", "1"},
    {"write_reply_size", "1"},
};

std::map<std::string, std::string> with_read_write_keys(std::map<std::string, std::string> keys) {
  for (const auto& [key, value] : kReadWriteIntKeys) keys.emplace(key, value);
  keys.emplace("write_fraction", "0.5");
  return keys;
}

}  // namespace

const std::map<std::string, std::string>& booksim_supported_keys() {
  static const std::map<std::string, std::string> keys = with_read_write_keys({
      {"topology", "fly"},
      {"k", "8"},
      {"n", "1"},
      {"routing_function", "dest_tag"},
      {"num_vcs", "16"},
      {"vc_buf_size", "8"},
      {"packet_size", "1"},
      {"traffic", "uniform"},
      {"hotspot_nodes", "{}"},
      {"injection_rate", "0.1"},
      {"injection_rate_uses_flits", "0"},
      {"injection_process", "bernoulli"},
      {"routing_delay", "1"},
      {"vc_alloc_delay", "1"},
      {"sw_alloc_delay", "1"},
      {"st_final_delay", "1"},
      {"credit_delay", "0"},
      {"vc_allocator", "separable_input_first"},
      {"sw_allocator", "separable_input_first"},
      {"seed", "0"},
      {"sample_period", "1000"},
      {"warmup_periods", "3"},
      {"max_samples", "10"},
      {"sim_type", "latency"},
      // BookSim's router and simulation keys, at the values this engine models
      // (booksim_fixed_values) or with any value where they only steer the run.
      {"hold_switch_for_packet", "0"},
      {"wait_for_tail_credit", "0"},
      {"alloc_iters", "1"},
      {"input_speedup", "1"},
      {"output_speedup", "1"},
      {"internal_speedup", "1.0"},
      {"arb_type", "round_robin"},
      {"vc_busy_when_full", "0"},
      {"vc_prioritize_empty", "0"},
      {"speculative", "0"},
      {"noq", "0"},
      {"output_delay", "0"},
      {"st_prepare_delay", "0"},
      {"output_buffer_size", "-1"},
      {"router", "iq"},
      {"classes", "1"},
      {"priority", "none"},
      {"include_queuing", "1"},
      {"sim_count", "1"},
      {"use_read_write", "0"},
      {"subnets", "1"},
      {"latency_thres", "500.0"},
      {"warmup_thres", "0.05"},
      {"acc_warmup_thres", "0.05"},
      {"stopping_thres", "0.05"},
      {"acc_stopping_thres", "0.05"},
      {"perm_seed", "0"},
      {"deadlock_warn_timeout", "256"},
      {"print_activity", "0"},
      {"print_csv_results", "0"},
      {"watch_out", std::string()},
      {"stats_out", std::string()},
      // Not BookSim's: packet-level allocator calibration (net.sw_alloc_patience), used with
      // hold_switch_for_packet = 1.
      {"sw_alloc_patience", "2"},
  });
  return keys;
}

const std::map<std::string, std::vector<std::string>>& booksim_fixed_values() {
  static const std::map<std::string, std::vector<std::string>> keys{
      {"hold_switch_for_packet", {"0", "1"}}, {"wait_for_tail_credit", {"0"}}, {"alloc_iters", {"1"}},
      {"input_speedup", {"1"}}, {"output_speedup", {"1"}}, {"internal_speedup", {"1", "2", "3", "4"}},
      {"arb_type", {"round_robin"}}, {"vc_busy_when_full", {"0"}}, {"vc_prioritize_empty", {"0"}},
      {"speculative", {"0"}}, {"noq", {"0"}}, {"output_delay", {"0"}}, {"st_prepare_delay", {"0"}},
      {"output_buffer_size", {"-1", "1", "2", "3", "4"}}, {"router", {"iq"}}, {"classes", {"1"}},
      {"priority", {"none"}},
      {"include_queuing", {"1"}}, {"sim_count", {"1"}}, {"use_read_write", {"0"}}, {"subnets", {"1"}},
      {"print_activity", {"0"}}, {"print_csv_results", {"0", "1"}}, {"watch_out", {"", "-"}}, {"stats_out", {""}},
  };
  return keys;
}

namespace {
std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return {};
  const auto e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

// BookSim options this engine knows of but does not model (an error says so, not "unknown").
const std::set<std::string>& unsupported_booksim_keys() {
  static const std::set<std::string> keys{
      "c", "x", "y", "xr", "yr", "limit", "network_file", "use_noc_latency", "in_ports", "out_ports",
      "spec_check_elig", "spec_check_cred", "spec_mask_by_reqs", "vc_alloc_arb_type", "sw_alloc_arb_type",
      "batch_size",
      "batch_count", "max_outstanding_requests", "viewer_trace", "watch_file", "watch_packets", "watch_flits",
      "watch_transactions", "sim_power", "power_output_file", "tech_file", "channel_width", "channel_sweep",
      "num_vcs_sweep", "injection_rate_sweep", "deadlock_timeout", "link_failures", "fail_seed",
      "routing_table_file", "xy_routing", "burst_alpha", "burst_beta", "burst_r1", "packet_size_rate",
      "traffic_class"};
  return keys;
}

std::vector<std::string> split_list(const std::string& v) {
  std::vector<std::string> items;
  std::string body = trim(v);
  if (!body.empty() && body.front() == '{') {
    if (body.back() != '}') return {"\x01"};
    body = body.substr(1, body.size() - 2);
    std::stringstream ss(body);
    std::string item;
    while (std::getline(ss, item, ',')) {
      item = trim(item);
      if (!item.empty()) items.push_back(item);
    }
    return items;
  }
  if (!body.empty()) items.push_back(body);
  return items;
}
}  // namespace

BooksimConfig BooksimConfig::from_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw ConfigError("net.booksim_config", "cannot read " + quote(path));
  std::stringstream ss;
  ss << in.rdbuf();
  return from_string(ss.str(), path);
}

BooksimConfig BooksimConfig::from_string(const std::string& text, const std::string& origin) {
  BooksimConfig c;
  for (const auto& kv : booksim_supported_keys()) c.values_[kv.first] = {kv.second, split_list(kv.second), ""};
  // Strip // comments line by line, remembering line numbers for statements.
  std::string stmt;
  int line_no = 0, stmt_line = 1;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    ++line_no;
    for (unsigned char ch : line)  // a NUL would cut every message that quotes the text
      if (ch < 0x20 && ch != '\t' && ch != '\r') {
        char hex[8];
        std::snprintf(hex, sizeof hex, "0x%02x", ch);
        throw ConfigError("", origin + ":" + std::to_string(line_no) + ": control character " + hex +
                                  "; allowed: text (tabs, spaces, printable characters)");
      }
    const auto cpos = line.find("//");
    if (cpos != std::string::npos) line = line.substr(0, cpos);
    for (char ch : line) {
      if (ch == ';') {
        const std::string s = trim(stmt);
        stmt.clear();
        if (s.empty()) continue;
        const auto eq = s.find('=');
        const std::string where = origin + ":" + std::to_string(stmt_line);
        if (eq == std::string::npos) throw ConfigError("", where + ": expected 'key = value;', got " + quote(s));
        c.assign(trim(s.substr(0, eq)), trim(s.substr(eq + 1)), where);
      } else {
        if (trim(stmt).empty() && ch != ' ' && ch != '\t') stmt_line = line_no;
        stmt += ch;
      }
    }
    stmt += ' ';
  }
  if (!trim(stmt).empty()) throw ConfigError("", origin + ":" + std::to_string(stmt_line) + ": missing ';' after " + quote(trim(stmt)));
  return c;
}

void BooksimConfig::set_override(const std::string& assignment) {
  const auto eq = assignment.find('=');
  if (eq == std::string::npos) throw ConfigError("", "override " + quote(assignment) + " is not key=value");
  assign(trim(assignment.substr(0, eq)), trim(assignment.substr(eq + 1)), "command line");
}

void BooksimConfig::assign(const std::string& key, const std::string& value, const std::string& where) {
  if (!booksim_supported_keys().count(key)) {
    if (unsupported_booksim_keys().count(key))
      throw ConfigError(key, where + ": BookSim option not modelled by cais-net-synthetic; remove it "
                                     "(`cais-net-synthetic --keys` lists the keys it reads)");
    throw ConfigError(key, where + ": unknown configuration key");
  }
  std::string v = value;
  if (v.size() >= 2 && v.front() == '"' && v.back() == '"') v = v.substr(1, v.size() - 2);
  auto items = split_list(v);
  if (items.size() == 1 && items[0] == "\x01") throw ConfigError(key, where + ": unbalanced '{' in " + quote(value));
  values_[key] = {v, items, where};
  set_[key] = true;
}

long BooksimConfig::get_int(const std::string& key) const {
  const std::string& s = values_.at(key).text;
  try {
    std::size_t pos = 0;
    const long v = std::stol(s, &pos);
    if (pos == s.size()) return v;
  } catch (const std::exception&) {
  }
  throw ConfigError(key, "expected an integer, got " + quote(s));
}

double BooksimConfig::get_double(const std::string& key) const {
  const std::string& s = values_.at(key).text;
  try {
    std::size_t pos = 0;
    const double v = std::stod(s, &pos);
    if (pos == s.size() && std::isfinite(v)) return v;
  } catch (const std::exception&) {
  }
  throw ConfigError(key, "expected a number, got " + quote(s));
}

std::string BooksimConfig::get_string(const std::string& key) const { return values_.at(key).text; }

std::vector<long> BooksimConfig::get_int_list(const std::string& key) const {
  std::vector<long> out;
  for (const auto& item : values_.at(key).items) {
    try {
      std::size_t pos = 0;
      out.push_back(std::stol(item, &pos));
      if (pos != item.size()) throw std::invalid_argument(item);
    } catch (const std::exception&) {
      throw ConfigError(key, "expected a list of integers, got " + quote(values_.at(key).text));
    }
  }
  return out;
}

double BooksimConfig::offered_flits() const {
  const double rate = get_double("injection_rate");
  return get_int("injection_rate_uses_flits") ? rate : rate * static_cast<double>(get_int("packet_size"));
}

namespace {
void require(const BooksimConfig& c, const std::string& key, const std::vector<std::string>& allowed) {
  const std::string v = c.get_string(key);
  for (const auto& a : allowed)
    if (v == a) return;
  std::string list;
  for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
  throw ConfigError(key, quote(v) + " is not supported (supported: " + list + ")");
}

constexpr long kMaxTerminals = 1024;
constexpr long kMaxVcs = 64;

long positive(const BooksimConfig& c, const std::string& key) {
  const long v = c.get_int(key);
  if (v <= 0) throw ConfigError(key, "must be > 0");
  return v;
}

long non_negative(const BooksimConfig& c, const std::string& key) {
  const long v = c.get_int(key);
  if (v < 0) throw ConfigError(key, "must be >= 0");
  return v;
}

void set_param(proto::Configure& cfg, const std::string& key, double d) { (*cfg.mutable_params())[key].set_d(d); }
void set_param_i(proto::Configure& cfg, const std::string& key, long i) { (*cfg.mutable_params())[key].set_i(i); }
void set_param_s(proto::Configure& cfg, const std::string& key, const std::string& s) {
  (*cfg.mutable_params())[key].set_s(s);
}
void set_param_b(proto::Configure& cfg, const std::string& key, bool b) { (*cfg.mutable_params())[key].set_b(b); }
}  // namespace

namespace {
// Top-level comma-separated items of `s` (commas inside braces do not split).
std::vector<std::string> split_top(const std::string& s) {
  std::vector<std::string> out;
  std::string cur;
  int depth = 0;
  for (char ch : s) {
    if (ch == '{') ++depth;
    if (ch == '}') --depth;
    if (ch == ',' && depth == 0) {
      out.push_back(trim(cur));
      cur.clear();
    } else {
      cur += ch;
    }
  }
  if (!trim(cur).empty()) out.push_back(trim(cur));
  return out;
}

std::vector<long> int_items(const std::string& key, const std::string& text) {
  std::string body = trim(text);
  if (!body.empty() && body.front() == '{' && body.back() == '}') body = body.substr(1, body.size() - 2);
  std::vector<long> out;
  for (const auto& item : split_top(body)) {
    std::size_t pos = 0;
    long v = 0;
    try {
      v = std::stol(item, &pos);
    } catch (const std::exception&) {
      pos = 0;
    }
    if (pos == 0 || pos != item.size()) throw ConfigError(key, "expected a list of integers, got " + quote(text));
    out.push_back(v);
  }
  return out;
}
}  // namespace

BooksimTraffic BooksimConfig::traffic() const {
  const std::string t = trim(get_string("traffic"));
  BooksimTraffic r;
  const auto open = t.find('(');
  r.pattern = trim(t.substr(0, open));
  if (open != std::string::npos) {
    if (t.back() != ')') throw ConfigError("traffic", "missing ')' in " + quote(t));
    std::string params = trim(t.substr(open + 1, t.size() - open - 2));
    // BookSim's parameter list is itself a {...} list: hotspot({{0,1}}), hotspot({{0,1},{2,1}}).
    if (!params.empty() && params.front() == '{' && params.back() == '}') params = params.substr(1, params.size() - 2);
    const auto items = split_top(params);
    if (r.pattern != "hotspot" || items.empty() || items.size() > 2)
      throw ConfigError("traffic", quote(t) + ": parameters are supported only as hotspot({{nodes}}) or "
                                   "hotspot({{nodes},{rates}})");
    r.hotspots = int_items("traffic", items[0]);
    if (items.size() == 2) {
      const auto rates = int_items("traffic", items[1]);
      for (long rate : rates)
        if (rate != rates.front())
          throw ConfigError("traffic", quote(t) + ": unequal hotspot rates are not supported (equal rates only)");
    }
    if (r.hotspots.empty()) throw ConfigError("traffic", quote(t) + ": hotspot needs at least one node");
  } else {
    r.hotspots = get_int_list("hotspot_nodes");
  }
  return r;
}

proto::Configure BooksimConfig::to_configure() const {
  for (const auto& kv : booksim_fixed_values()) {
    const std::string v = get_string(kv.first);
    bool ok = false;
    for (const auto& a : kv.second) {
      char* end = nullptr;
      const double dv = std::strtod(v.c_str(), &end), da = std::strtod(a.c_str(), nullptr);
      ok |= v == a || (!v.empty() && end && *end == 0 && !a.empty() && dv == da);
    }
    if (!ok) {
      std::string list;
      for (const auto& a : kv.second) list += (list.empty() ? "" : ", ") + (a.empty() ? std::string("\"\"") : a);
      const std::string& where = values_.at(kv.first).where;
      throw ConfigError(kv.first, (where.empty() ? "" : where + ": ") + quote(v) + " is not modelled (supported: " +
                                      list + ")");
    }
  }
  // BookSim's internal_speedup S runs its router's stages S times per cycle: a 1-cycle stage
  // (routing, VC allocation, switch allocation, crossbar) takes 1/S cycle, and an output buffers
  // up to output_buffer_size flits for its link. The engine models 0- and 1-cycle stages and an
  // output buffer of S flits (S = 1: BookSim's unbounded default, which never holds more than one).
  const long speedup = std::lround(get_double("internal_speedup"));
  const long out_buffer = std::lround(get_double("output_buffer_size"));
  auto refuse = [&](const std::string& key, const std::string& supported) {
    const std::string& where = values_.at(key).where;
    throw ConfigError(key, (where.empty() ? "" : where + ": ") + quote(get_string(key)) +
                               " is not modelled with internal_speedup = " + std::to_string(speedup) +
                               " (supported: " + supported + ")");
  };
  if (speedup > 1) {
    if (get_int("hold_switch_for_packet")) refuse("hold_switch_for_packet", "0");  // no speedup at packet level
    for (const char* key : {"routing_delay", "vc_alloc_delay", "sw_alloc_delay", "st_final_delay"})
      if (get_int(key) > 1) refuse(key, "0, 1");
    if (out_buffer != speedup) refuse("output_buffer_size", std::to_string(speedup) + ", the internal_speedup");
  } else if (out_buffer > 1) {
    refuse("output_buffer_size", "-1, 1");
  }
  for (const char* key : {"latency_thres", "warmup_thres", "acc_warmup_thres", "stopping_thres", "acc_stopping_thres"})
    get_double(key);
  for (const char* key : {"perm_seed", "deadlock_warn_timeout"}) get_int(key);
  // The read/write scheme's keys (use_read_write = 0: unused, but of BookSim's type).
  for (const auto& [key, value] : kReadWriteIntKeys) get_int(key);
  get_double("write_fraction");
  require(*this, "topology", {"fly"});
  if (get_int("n") != 1) throw ConfigError("n", "only n = 1 (a single k-port router) is supported");
  require(*this, "routing_function", {"dest_tag"});
  const BooksimTraffic traffic_spec = traffic();
  if (traffic_spec.pattern != "uniform" && traffic_spec.pattern != "randperm" && traffic_spec.pattern != "hotspot")
    throw ConfigError("traffic", quote(traffic_spec.pattern) + " is not supported (supported: uniform, randperm, hotspot)");
  require(*this, "injection_process", {"bernoulli"});
  require(*this, "vc_allocator", {"separable_input_first"});
  require(*this, "sw_allocator", {"separable_input_first"});
  require(*this, "sim_type", {"latency"});
  // Bounded: every terminal and VC is a node or buffer built up front (k = 66666668 hung the reader).
  const long k = positive(*this, "k");
  if (k > kMaxTerminals) throw ConfigError("k", "must be <= " + std::to_string(kMaxTerminals) + ", got " + std::to_string(k));
  const long flits = positive(*this, "packet_size");
  const long vcs = positive(*this, "num_vcs");
  if (vcs > kMaxVcs) throw ConfigError("num_vcs", "must be <= " + std::to_string(kMaxVcs) + ", got " + std::to_string(vcs));
  const long depth = positive(*this, "vc_buf_size");
  if (flits > depth) throw ConfigError("packet_size", "larger than vc_buf_size (virtual cut-through needs room for a packet)");
  const long uses_flits = get_int("injection_rate_uses_flits");
  if (uses_flits != 0 && uses_flits != 1) throw ConfigError("injection_rate_uses_flits", "must be 0 or 1");
  const double rate = get_double("injection_rate");
  const double pkt_rate = uses_flits ? rate / static_cast<double>(flits) : rate;
  if (rate < 0 || pkt_rate > 1) throw ConfigError("injection_rate", "must give 0..1 packets per node per cycle");
  const auto hot = traffic_spec.hotspots;
  for (long h : hot)
    if (h < 0 || h >= k) throw ConfigError("hotspot_nodes", "node " + std::to_string(h) + " is not a terminal (0.." + std::to_string(k - 1) + ")");
  if (traffic_spec.pattern == "hotspot" && hot.empty()) throw ConfigError("hotspot_nodes", "hotspot traffic needs hotspot_nodes = {...}");
  const long period = positive(*this, "sample_period");
  const long warm = non_negative(*this, "warmup_periods");
  const long samples = positive(*this, "max_samples");

  constexpr std::uint32_t kFlitBytes = 16;
  constexpr double kCycleNs = 1.0;
  proto::Configure cfg;
  cfg.set_engine_name("synthetic");
  cfg.set_engine_index(0);
  cfg.set_seed(static_cast<std::uint64_t>(non_negative(*this, "seed")));
  auto* topo = cfg.mutable_topology();
  topo->set_name("fly" + std::to_string(k));
  const auto sw = static_cast<std::uint32_t>(k);
  for (std::uint32_t g = 0; g < sw; ++g) {
    auto* n = topo->add_nodes();
    n->set_id(g);
    n->set_kind(proto::NODE_GPU);
    n->set_name("t" + std::to_string(g));
    n->set_num_ports(1);
  }
  auto* s = topo->add_nodes();
  s->set_id(sw);
  s->set_kind(proto::NODE_SWITCH);
  s->set_name("sw0");
  s->set_num_ports(sw);
  for (std::uint32_t g = 0; g < sw; ++g)
    for (int dir = 0; dir < 2; ++dir) {
      auto* l = topo->add_links();
      l->set_src_node(dir ? sw : g);
      l->set_src_port(dir ? g : 0);
      l->set_dst_node(dir ? g : sw);
      l->set_dst_port(dir ? 0 : g);
      l->set_bw_gbps(kFlitBytes / kCycleNs);
      l->set_latency_ps(static_cast<std::uint64_t>(kCycleNs * 1000));
      l->set_lanes(1);
    }
  for (std::uint32_t i = 0; i <= sw; ++i) {
    cfg.add_hosted_nodes(i);
    cfg.add_node_engine(0);
  }
  cfg.set_window_ps(static_cast<std::uint64_t>(kCycleNs * 1000));
  set_param_s(cfg, "host.gpu_model", "synthetic");
  set_param_s(cfg, "host.switch_model", "nvswitch");
  set_param_i(cfg, "net.vcs_per_port", vcs);
  set_param_i(cfg, "net.vc_depth_flits", depth);
  set_param_s(cfg, "net.vc_buffer_scope", "port");  // BookSim's vc_buf_size is per VC of a port
  set_param_i(cfg, "net.flit_bytes", kFlitBytes);
  set_param_i(cfg, "net.header_flits", 1);
  const double stage_ns = kCycleNs / static_cast<double>(speedup);  // a stage is an internal cycle
  set_param(cfg, "net.routing_delay_ns", non_negative(*this, "routing_delay") * stage_ns);
  set_param(cfg, "net.vc_alloc_delay_ns", non_negative(*this, "vc_alloc_delay") * stage_ns);
  set_param(cfg, "net.sw_alloc_delay_ns", non_negative(*this, "sw_alloc_delay") * stage_ns);
  set_param(cfg, "net.xbar_delay_ns", non_negative(*this, "st_final_delay") * stage_ns);
  set_param(cfg, "net.credit_delay_ns", non_negative(*this, "credit_delay") * kCycleNs);
  set_param(cfg, "net.stats_bin_ns", static_cast<double>(period) * kCycleNs);
  set_param_i(cfg, "net.sw_alloc_patience", non_negative(*this, "sw_alloc_patience"));
  // 1 to 4 (checked above): the crossbar and its allocators run that many cycles per flit time,
  // an output buffers that many flits (docs/VALIDATION.md, "Internal speedup 2").
  set_param_i(cfg, "net.internal_speedup", speedup);
  // BookSim's default (hold_switch_for_packet = 0) allocates the switch per flit.
  set_param_s(cfg, "net.sw_alloc_granularity", get_int("hold_switch_for_packet") ? "packet" : "flit");
  set_param_b(cfg, "net.traffic_control", false);
  set_param_b(cfg, "net.functional", false);
  set_param_s(cfg, "net.features", "");
  set_param_s(cfg, "synthetic.traffic", traffic_spec.pattern);
  auto& hl = (*cfg.mutable_params())["synthetic.hotspot_nodes"];
  hl.mutable_list();
  for (long h : hot) hl.mutable_list()->add_items()->set_i(h);
  set_param_i(cfg, "synthetic.packet_flits", flits);
  set_param(cfg, "synthetic.injection_rate_packets_per_cycle", pkt_rate);
  set_param_i(cfg, "synthetic.warmup_cycles", warm * period);
  set_param_i(cfg, "synthetic.measure_cycles", samples * period);
  // Measured packets must drain; past this the run is declared unstable (saturated).
  set_param_i(cfg, "synthetic.max_drain_cycles", 4 * (warm + samples) * period);
  return cfg;
}

}  // namespace cais::net
