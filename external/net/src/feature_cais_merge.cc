// The CAIS merge unit: load and reduction merging, their acks, statistics. Its table (LRU
// eviction, timeouts) is in feature_cais_merge_table.cc, its throttling in
// feature_cais_merge_throttle.cc; the rules are stated in cais/net/feature_cais_merge.h.
#include "cais/net/feature_cais_merge.h"

#include <algorithm>
#include <memory>
#include <sstream>

#include "cais/errors.h"
#include "cais/params.h"

namespace cais::net {

CaisMergeConfig CaisMergeConfig::from_params(const Params& p) {
  CaisMergeConfig c;
  c.unlimited = p.get_bool("net.cais_merge.unlimited");
  c.table_bytes = p.get_uint("net.cais_merge.table_bytes");
  c.table_entries = static_cast<std::uint32_t>(p.get_uint("net.cais_merge.table_entries"));
  if (c.table_entries == 0) throw ConfigError("net.cais_merge.table_entries", "must be >= 1");
  if (c.table_bytes == 0) throw ConfigError("net.cais_merge.table_bytes", "must be >= 1");
  c.timeout_ps = p.get_time_ps("net.cais_merge.timeout_ns", 1);
  c.lookup_delay_ps = feature_delay_ps(p, "net.cais_merge.lookup_delay_ns");
  c.throttle = p.get_bool("net.cais_merge.throttle");
  c.throttle_ahead_entries = static_cast<std::uint32_t>(p.get_uint("net.cais_merge.throttle_ahead_entries"));
  c.throttle_resume_entries = static_cast<std::uint32_t>(p.get_uint("net.cais_merge.throttle_resume_entries"));
  c.throttle_hold_ps = p.get_time_ps("net.cais_merge.throttle_hold_ns", 1);
  if (c.throttle && c.throttle_resume_entries >= c.throttle_ahead_entries)
    throw ConfigError("net.cais_merge.throttle_resume_entries", "must be < throttle_ahead_entries");
  c.red_acks = p.get_bool("net.cais_merge.outstanding_cap");
  p.get_positive("net.cais_merge.outstanding_cap_kb");  // the GPUs' cap (hopper_config.cc)
  c.shape = PacketShape::from_params(p);
  return c;
}

CaisMergeUnit::CaisMergeUnit(const CaisMergeConfig& cfg, std::uint32_t num_ports,
                             std::uint32_t feature_index, std::uint32_t switch_node)
    : cfg_(cfg), num_ports_(std::max<std::uint32_t>(1, num_ports)), feature_index_(feature_index),
      node_(switch_node) {
  tables_.resize(num_ports_);
  // Every slot exists up front: entries never move (no reallocation on the hot path). An
  // unlimited table starts with the same slots and doubles them when they run out.
  entries_.resize(static_cast<std::size_t>(num_ports_) * cfg_.table_entries);
  free_.reserve(entries_.size());
  for (std::size_t i = entries_.size(); i-- > 0;) free_.push_back(static_cast<std::int32_t>(i));
  std::size_t slots = 16;
  while (slots < entries_.size() * 4) slots <<= 1;
  cam_.assign(slots, CamSlot{});
  cam_mask_ = slots - 1;
}

void MergeTableStats::add_wait(double ns) {
  wait_ns.add(ns);
  std::size_t b = 0;
  while (b < kWaitBins - 1 && ns >= kWaitBinEdgesNs[b]) ++b;
  ++wait_bins[b];
}

std::int32_t CaisMergeUnit::take_free_slot() {
  if (free_.empty()) {  // unlimited mode only: allocate() checked capacity otherwise
    const std::size_t old = entries_.size(), grown = std::max<std::size_t>(16, old * 2);
    entries_.resize(grown);
    for (std::size_t i = grown; i-- > old;) free_.push_back(static_cast<std::int32_t>(i));
    if (cam_.size() < grown * 4) cam_resize(cam_.size() * 2);
  }
  const std::int32_t idx = free_.back();
  free_.pop_back();
  return idx;
}

void CaisMergeUnit::cam_resize(std::size_t slots) {
  std::vector<CamSlot> old;
  old.swap(cam_);
  cam_.assign(slots, CamSlot{});
  cam_mask_ = slots - 1;
  for (const CamSlot& c : old)
    if (c.idx >= 0) cam_insert(c.addr, c.kind, c.idx);
}

bool CaisMergeUnit::add_requester(Entry& e, std::uint32_t src, std::uint32_t contributions) {
  if (contributions > 1) {  // merged elsewhere: its GPUs are unknown, count each one
    e.distinct += contributions;
    return e.requesters.insert(src);
  }
  if (!e.requesters.insert(src)) return false;
  ++e.distinct;
  return true;
}

void CaisMergeUnit::cam_insert(std::uint64_t addr, std::uint32_t kind, std::int32_t idx) {
  std::size_t i = cam_home(addr, kind);
  while (cam_[i].idx >= 0) i = (i + 1) & cam_mask_;
  cam_[i] = CamSlot{addr, idx, kind};
}

void CaisMergeUnit::cam_erase(std::uint64_t addr, std::uint32_t kind) {
  std::size_t i = cam_home(addr, kind);
  while (cam_[i].idx >= 0 && !(cam_[i].addr == addr && cam_[i].kind == kind)) i = (i + 1) & cam_mask_;
  if (cam_[i].idx < 0) throw InvariantError("cais_merge: CAM entry missing");
  // Backward-shift deletion: pull later members of the probe run into the hole.
  std::size_t j = i;
  for (;;) {
    j = (j + 1) & cam_mask_;
    if (cam_[j].idx < 0) break;
    const std::size_t k = cam_home(cam_[j].addr, cam_[j].kind);
    const bool movable = (i <= j) ? (k <= i || k > j) : (k <= i && k > j);
    if (movable) {
      cam_[i] = cam_[j];
      i = j;
    }
  }
  cam_[i].idx = -1;
}

std::uint32_t CaisMergeUnit::table_of(std::uint32_t port) const {
  return port % num_ports_;  // a router that does not say: spread
}

std::uint32_t CaisMergeUnit::ahead(std::uint32_t group, std::uint32_t gpu) const {
  auto it = ahead_.find(PairKey{group, gpu});
  return it == ahead_.end() ? 0 : it->second.n;
}

MergeTableStats CaisMergeUnit::totals() const {
  MergeTableStats s;
  for (const auto& t : tables_) {
    s.hits += t.st.hits;
    s.misses += t.st.misses;
    s.evictions += t.st.evictions;
    s.timeouts += t.st.timeouts;
    s.bypasses += t.st.bypasses;
    s.deferred_evictions += t.st.deferred_evictions;
    s.completions += t.st.completions;
    s.partial_flushes += t.st.partial_flushes;
    s.merged_writes += t.st.merged_writes;
    s.bytes_saved += t.st.bytes_saved;
    s.live_bytes += t.st.live_bytes;
    s.live_entries += t.st.live_entries;
    s.high_water_bytes = std::max(s.high_water_bytes, t.st.high_water_bytes);
    s.high_water_entries = std::max(s.high_water_entries, t.st.high_water_entries);
    for (std::size_t b = 0; b < MergeTableStats::kWaitBins; ++b) s.wait_bins[b] += t.st.wait_bins[b];
  }
  return s;
}

// ------------------------------------------------------------------ dispatch

SwitchFeature::Verdict CaisMergeUnit::on_arrival(SwitchContext& ctx, std::uint32_t in_port, PacketHandle h) {
  const Packet& p = ctx.packet(h);
  switch (p.type) {
    case proto::PKT_CAIS_LD_REQ: return on_load_req(ctx, in_port, h);
    case proto::PKT_CAIS_LD_RESP: return on_load_resp(ctx, in_port, h);
    case proto::PKT_CAIS_RED:
      // A merged write this switch produced is not merged again here.
      if (p.origin == node_ && p.count > 1) return Verdict::kForward;
      return on_reduction(ctx, in_port, h);
    default: return Verdict::kForward;
  }
}

void CaisMergeUnit::forward(SwitchContext& ctx, std::uint32_t in_port, PacketHandle h) {
  ctx.inject(h, in_port, cfg_.lookup_delay_ps);
}

// A packet the unit makes (an answer from the cached line, a merged sum, an ack, a throttle)
// leaves the unit at the home's port and crosses to its output as NVLS's copies do: through
// that output's replication queue, not the crossbar slot of the requester's input port, which
// carries that GPU's own traffic.
void CaisMergeUnit::emit(SwitchContext& ctx, PacketHandle h) {
  ctx.inject_at_output(h, cfg_.lookup_delay_ps);
}

// ------------------------------------------------------------------ loads

SwitchFeature::Verdict CaisMergeUnit::on_load_req(SwitchContext& ctx, std::uint32_t in_port, PacketHandle h) {
  Packet& p = ctx.packet(h);
  const std::uint32_t N = p.aux;  // requesters to expect
  if (N < 2) return Verdict::kForward;  // a single requester: nothing to merge
  if (!ctx.attached(p.dst)) return Verdict::kForward;  // merged at the owner's switch
  if (p.count == 0)
    throw InvariantError(ctx.name() + ": CAIS_LD_REQ without requested bytes (count) for addr " +
                         std::to_string(p.addr));
  const TimePs now = ctx.now();
  std::int32_t idx = find(p.addr, Kind::kLoad);
  if (idx >= 0) {
    Entry& e = entries_[idx];
    Table& t = tables_[e.table];
    check_lines(ctx, e, p);
    t.st.hits += e.lines;
    ++e.count;
    ++e.packets;
    e.last_req_ps = e.last_access_ps = now;
    touch(idx);
    const Waiter w{p.src, p.tag, p.inject_ps};
    ctx.release(h);
    if (add_requester(e, w.src, 1)) join(ctx, e, w.src);
    if (e.state == State::kLoadWait) {
      e.waiters.push_back(w);
      return Verdict::kConsumed;
    }
    answer(ctx, e, w);
    t.st.bytes_saved += e.payload_bytes;
    if (e.distinct >= e.expected) {
      t.st.completions += e.lines;
      release(ctx, idx);
    }
    return Verdict::kConsumed;
  }
  const std::uint32_t tbl = table_of(ctx.port_toward(p.dst));
  tables_[tbl].st.misses += p.lines;
  idx = allocate(ctx, tbl, p.addr, Kind::kLoad, p.count, p.lines);
  if (idx < 0) {
    tables_[tbl].st.bypasses += ctx.packet(h).lines;
    forward(ctx, in_port, h);
    return Verdict::kConsumed;
  }
  Packet& q = ctx.packet(h);  // eviction may have created packets: re-fetch
  Entry& e = entries_[idx];
  e.more_lines = q.more_lines;
  e.state = State::kLoadWait;
  e.home = q.dst;
  e.expected = N;
  e.count = 1;
  e.packets = 1;
  e.group = q.group;
  e.first_src = q.src;
  e.first_tag = q.tag;
  e.first_inject_ps = q.inject_ps;
  e.first_req_ps = e.last_req_ps = e.last_access_ps = now;
  add_requester(e, q.src, 1);
  join(ctx, e, q.src);
  forward(ctx, in_port, h);  // the one fetch from the owner
  return Verdict::kConsumed;
}

SwitchFeature::Verdict CaisMergeUnit::on_load_resp(SwitchContext& ctx, std::uint32_t in_port, PacketHandle h) {
  Packet& p = ctx.packet(h);
  const std::int32_t idx = find(p.addr, Kind::kLoad);
  if (idx < 0) return Verdict::kForward;  // a bypassed request's response
  Entry& e = entries_[idx];
  if (e.state != State::kLoadWait || p.dst != e.first_src || p.tag != e.first_tag) return Verdict::kForward;
  Table& t = tables_[e.table];
  // Fill: the entry's charge becomes the line actually returned.
  t.st.live_bytes = t.st.live_bytes - e.line_bytes + p.payload_bytes;
  t.st.high_water_bytes = std::max(t.st.high_water_bytes, t.st.live_bytes);
  e.line_bytes = p.payload_bytes;
  e.payload_bytes = p.payload_bytes;
  e.data_flits = p.flits;
  e.data_src = p.src;
  if (ctx.functional()) e.values.assign(p.values.begin(), p.values.end());
  e.state = State::kLoadReady;
  e.last_access_ps = ctx.now();
  touch(idx);
  forward(ctx, in_port, h);  // the fetched line goes on to the first requester
  for (const Waiter& w : e.waiters) {
    answer(ctx, e, w);
    t.st.bytes_saved += e.payload_bytes;
  }
  e.waiters.clear();
  if (e.distinct >= e.expected) {
    t.st.completions += e.lines;
    release(ctx, idx);
  } else if (e.evict_on_fill) {
    t.st.evictions += e.lines;
    release(ctx, idx);
  } else {
    arm_timer(ctx, idx);
  }
  return Verdict::kConsumed;
}

void CaisMergeUnit::answer(SwitchContext& ctx, const Entry& e, const Waiter& w) {
  const PacketHandle r = ctx.new_packet();
  Packet& q = ctx.packet(r);
  q.type = proto::PKT_CAIS_LD_RESP;
  q.src = e.data_src;
  q.dst = w.src;
  q.addr = e.addr;
  q.tag = w.tag;
  q.group = e.group;
  q.aux = e.expected;
  q.inject_ps = w.inject_ps;
  q.origin = node_;
  q.payload_bytes = e.payload_bytes;
  q.flits = e.data_flits;  // as the owner sized the line
  q.lines = e.lines;
  q.more_lines = e.more_lines;
  if (ctx.functional()) q.values.assign(e.values.begin(), e.values.end());
  emit(ctx, r);
}

// ------------------------------------------------------------------ reductions

SwitchFeature::Verdict CaisMergeUnit::on_reduction(SwitchContext& ctx, std::uint32_t in_port, PacketHandle h) {
  Packet& p = ctx.packet(h);
  const std::uint32_t N = p.aux;  // contributions to expect
  const std::uint32_t c = std::max<std::uint32_t>(1, p.count);
  if (N < 2 || c >= N) return Verdict::kForward;  // complete on its own
  if (!ctx.attached(p.dst)) return Verdict::kForward;  // merged at the home's switch
  const TimePs now = ctx.now();
  std::int32_t idx = find(p.addr, Kind::kReduction);
  if (idx >= 0) {
    Entry& e = entries_[idx];
    Table& t = tables_[e.table];
    check_lines(ctx, e, p);
    t.st.hits += e.lines;
    if (ctx.functional()) {
      if (p.values.size() != e.values.size())
        throw InvariantError(ctx.name() + ": CAIS_RED to addr " + std::to_string(p.addr) + " carries " +
                             std::to_string(p.values.size()) + " values, the entry holds " +
                             std::to_string(e.values.size()));
      for (std::size_t i = 0; i < e.values.size(); ++i) e.values[i] += p.values[i];
    }
    e.count += c;
    ++e.packets;
    e.last_req_ps = e.last_access_ps = now;
    touch(idx);
    add_contributor(e, p);
    const std::uint32_t src = p.src;
    ctx.release(h);
    if (add_requester(e, src, c)) join(ctx, e, src);
    if (e.distinct >= e.expected) {
      flush_reduction(ctx, idx, true);
      release(ctx, idx);
    }
    return Verdict::kConsumed;
  }
  const std::uint32_t tbl = table_of(ctx.port_toward(p.dst));
  tables_[tbl].st.misses += p.lines;
  idx = allocate(ctx, tbl, p.addr, Kind::kReduction, p.payload_bytes, p.lines);
  if (idx < 0) {
    const Packet& b = ctx.packet(h);  // eviction may have created packets: re-fetch
    tables_[tbl].st.bypasses += b.lines;
    if (cfg_.red_acks && b.origin == b.src) send_red_ack(ctx, b.src, b.lines, b.addr, b.group);
    forward(ctx, in_port, h);
    return Verdict::kConsumed;
  }
  Packet& q = ctx.packet(h);  // eviction may have created packets: re-fetch
  Entry& e = entries_[idx];
  e.more_lines = q.more_lines;
  e.state = State::kReduction;
  e.home = q.dst;
  e.expected = N;
  e.count = c;
  e.packets = 1;
  e.group = q.group;
  e.payload_bytes = q.payload_bytes;
  e.data_flits = q.flits;
  e.first_src = q.src;
  e.first_tag = q.tag;
  e.first_inject_ps = q.inject_ps;
  e.first_req_ps = e.last_req_ps = e.last_access_ps = now;
  if (ctx.functional()) e.values.assign(q.values.begin(), q.values.end());
  add_contributor(e, q);
  const std::uint32_t src = q.src;
  ctx.release(h);
  add_requester(e, src, c);
  join(ctx, e, src);
  arm_timer(ctx, idx);
  return Verdict::kConsumed;
}

void CaisMergeUnit::flush_reduction(SwitchContext& ctx, std::int32_t idx, bool complete) {
  Entry& e = entries_[idx];
  Table& t = tables_[e.table];
  const PacketHandle r = ctx.new_packet();
  Packet& q = ctx.packet(r);
  q.type = proto::PKT_CAIS_RED;
  q.src = e.first_src;
  q.dst = e.home;
  q.addr = e.addr;
  q.tag = e.first_tag;
  q.group = e.group;
  q.aux = e.expected;
  q.count = e.count;
  q.inject_ps = e.first_inject_ps;
  q.origin = node_;
  q.payload_bytes = e.payload_bytes;
  q.flits = e.data_flits;  // as the first contributor sized it
  q.lines = e.lines;
  q.more_lines = e.more_lines;
  if (ctx.functional()) q.values.assign(e.values.begin(), e.values.end());
  t.st.merged_writes += e.lines;
  if (complete) t.st.completions += e.lines;
  else t.st.partial_flushes += e.lines;
  t.st.bytes_saved += static_cast<std::uint64_t>(e.packets - 1) * e.payload_bytes;
  emit(ctx, r);
  ack_contributors(ctx, e);  // every retirement of a reduction entry (complete, evicted, timed out) comes here
}

// ------------------------------------------------------------------ reduction acks

void CaisMergeUnit::add_contributor(Entry& e, const Packet& p) {
  if (!cfg_.red_acks || p.origin != p.src) return;  // only what a GPU issued (a merged sum is not)
  for (Contributor& c : e.contributors)
    if (c.gpu == p.src) {
      ++c.packets;
      return;
    }
  e.contributors.push_back(Contributor{p.src, 1});
}

void CaisMergeUnit::ack_contributors(SwitchContext& ctx, Entry& e) {
  for (const Contributor& c : e.contributors)
    send_red_ack(ctx, c.gpu, c.packets * e.lines, e.addr, e.group);
  e.contributors.clear();
}

void CaisMergeUnit::send_red_ack(SwitchContext& ctx, std::uint32_t gpu, std::uint32_t lines, std::uint64_t addr,
                                 std::uint32_t group) {
  const PacketHandle r = ctx.new_control_packet(proto::PKT_CAIS_RED_ACK, node_, gpu, cfg_.shape.flits(0));
  Packet& q = ctx.packet(r);
  q.addr = addr;
  q.group = group;
  q.count = lines;  // the GPU's lines this ack retires
  ++red_acks_sent_;
  red_ack_lines_ += lines;
  emit(ctx, r);
}

// ------------------------------------------------------------------ statistics, end of run

void CaisMergeUnit::register_stats(StatsRegistry& reg, const std::string& prefix) const {
  for (std::uint32_t i = 0; i < tables_.size(); ++i) {
    // prefix is "<switch>.cais_merge": e.g. sw8.cais_merge.port5.hits.
    const std::string base = prefix + ".port" + std::to_string(i) + ".";
    const MergeTableStats& s = tables_[i].st;
    reg.counter(base + "hits", "requests", &s.hits);
    reg.counter(base + "misses", "requests", &s.misses);
    reg.counter(base + "evictions", "entries", &s.evictions);
    reg.counter(base + "timeouts", "entries", &s.timeouts);
    reg.counter(base + "bypasses", "requests", &s.bypasses);
    reg.counter(base + "deferred_evictions", "entries", &s.deferred_evictions);
    reg.counter(base + "completions", "entries", &s.completions);
    reg.counter(base + "partial_flushes", "entries", &s.partial_flushes);
    reg.counter(base + "merged_writes", "packets", &s.merged_writes);
    reg.counter(base + "bytes_saved", "B", &s.bytes_saved);
    reg.counter(base + "high_water_bytes", "B", &s.high_water_bytes);
    reg.counter(base + "high_water_entries", "entries", &s.high_water_entries);
    reg.histogram(base + "wait", "ns", &s.wait_ns);
    for (std::size_t k = 0; k < 2; ++k) {  // e.g. port5.high_water_entries_load, port5.wait_reduction.mean
      const std::string kind = k ? "_reduction" : "_load";
      reg.counter(base + "high_water_entries" + kind, "entries", &s.kind_high_water_entries[k]);
      reg.histogram(base + "wait" + kind, "ns", &s.kind_wait_ns[k]);
      reg.histogram(base + "life" + kind, "ns", &s.kind_life_ns[k]);
      // entries x us: divided by the run's time, the time-mean number of live entries
      reg.value(base + "entry_us" + kind, "entry-us", [&s, k] { return s.kind_entry_ps[k] / 1e6; });
      reg.value(base + "high_water_at_us" + kind, "us", [&s, k] { return static_cast<double>(s.kind_high_water_ps[k]) / 1e6; });
    }
    for (std::size_t b = 0; b < MergeTableStats::kWaitBins; ++b) {
      const bool last = b == MergeTableStats::kWaitBins - 1;
      const double edge = last ? MergeTableStats::kWaitBinEdgesNs[b - 1] : MergeTableStats::kWaitBinEdgesNs[b];
      reg.counter(base + "wait_bins." + (last ? "ge_" : "lt_") + std::to_string(static_cast<long long>(edge)) + "ns",
                  "entries", &s.wait_bins[b]);
    }
  }
  reg.counter(prefix + ".throttles", "packets", &throttles_sent_);
  reg.counter(prefix + ".unthrottles", "packets", &unthrottles_sent_);
  reg.counter(prefix + ".throttle_holds_renewed", "holds", &holds_renewed_);
  reg.counter(prefix + ".throttle_holds_lapsed", "holds", &holds_lapsed_);
  reg.counter(prefix + ".red_acks", "packets", &red_acks_sent_);
  reg.counter(prefix + ".red_ack_lines", "lines", &red_ack_lines_);
}

void CaisMergeUnit::check_drained() const {
  const auto listed = std::count_if(group_head_.begin(), group_head_.end(),
                                    [](const auto& g) { return g.second >= 0; });
  if (live_ == 0 && ahead_.empty() && listed == 0) return;
  std::ostringstream os;
  os << "cais_merge at node " << node_ << ": " << live_ << " merge entries left behind";
  for (const auto& e : entries_) {
    if (e.state == State::kFree) continue;
    os << " [addr " << e.addr << (e.state == State::kReduction ? " reduction" : " load") << " from " << e.distinct
       << "/" << e.expected << " GPUs]";
    break;
  }
  if (!ahead_.empty()) os << "; " << ahead_.size() << " throttle counters not zero";
  if (listed) os << "; " << listed << " groups' entry lists not empty";
  throw InvariantError(os.str());
}

namespace {
const bool registered = [] {
  FeatureRegistry::instance().add("cais_merge", [](const FeatureArgs& a) {
    return std::make_unique<CaisMergeUnit>(CaisMergeConfig::from_params(*a.params), a.num_ports, a.feature_index,
                                           a.switch_node);
  });
  return true;
}();
}  // namespace

}  // namespace cais::net
