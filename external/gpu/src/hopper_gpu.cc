// Hopper GPU: construction, launches, thread-block scheduler and block execution.
#include "cais/gpu/hopper_gpu.h"

#include <algorithm>
#include <sstream>

#include "cais/errors.h"

namespace cais::gpu {

HopperGpu::HopperGpu(Sim& sim, std::uint32_t node, std::shared_ptr<const Workload> wl)
    : NodeComponent(sim, sim.node(node).name, node << 8), node_(node), rank_(node), wl_(std::move(wl)) {
  const Params& p = sim.params();
  cfg_ = HopperConfig::from_params(p);
  functional_ = wl_->proto().functional();
  rng_ = sim.make_rng("gpu." + name());
  sms_.resize(cfg_.num_sms + 1);  // the last queue is the copy engine's
  for (auto& s : sms_) s.port.bytes_per_ps = cfg_.sm_port_bytes_per_ps;
  l2_.bytes_per_ps = cfg_.l2_bytes_per_ps;
  l2_tiles_.set_capacity(cfg_.l2_bytes);
  hbm_.bytes_per_ps = cfg_.hbm_bytes_per_ps;

  const auto& info = sim.node(node);
  for (const auto& l : info.out) has_ports_ |= l.connected;
  if (has_ports_) {
    flit_bytes_ = static_cast<std::uint32_t>(p.get_uint("net.flit_bytes"));
    header_flits_ = static_cast<std::uint32_t>(p.get_uint("net.header_flits"));
    num_vcs_ = static_cast<std::uint32_t>(p.get_uint("net.vcs_per_port"));
    const auto depth = static_cast<std::uint32_t>(p.get_uint("net.vc_depth_flits"));
    // Same VC classes as the switch (external/net vc_allocator): requests and responses apart;
    // with traffic control, loads, reductions/stores and responses apart.
    member_acks_ = p.has("net.nvls.member_acks") && p.get_bool("net.nvls.member_acks");
    const bool tc = p.get_bool("net.traffic_control");
    if (num_vcs_ < (tc ? 3u : 2u)) throw ConfigError("net.vcs_per_port", tc ? "needs >= 3 with traffic control" : "needs >= 2");
    if (tc) {
      const std::uint32_t resp = std::max<std::uint32_t>(1, num_vcs_ / 4), rest = num_vcs_ - resp;
      vc_of_ = {0, rest, rest - rest / 2};
    } else {
      vc_of_ = {0, num_vcs_ / 2, 0};
    }
    planes_ = init_endpoint_ports(sim, node, name(), num_vcs_, depth, flit_bytes_, out_, in_);
    port_q_.resize(out_.size());
  }
  if (functional_)
    for (const auto& b : wl_->buffers()) mem_.emplace_back(b.b->bytes() / b.elem_bytes, 0.0);
  setup_launches();

  auto& st = sim.stats();
  const std::string n = name();
  st.counter(n + ".tbs_completed", "blocks", &tbs_done_);
  st.counter(n + ".mma_flops", "FLOP", &mma_flops_);
  st.counter(n + ".alu_flops", "FLOP", &alu_flops_);
  st.counter(n + ".local.ld_bytes", "B", &ld_bytes_);
  st.counter(n + ".local.st_bytes", "B", &st_bytes_);
  st.counter(n + ".local.hbm_read_bytes", "B", &hbm_read_bytes_);
  st.counter(n + ".local.l2_tile_hits", "tiles", &l2_hits_);
  st.counter(n + ".local.l2_tile_misses", "tiles", &l2_misses_);
  st.value(n + ".hbm.bytes", "B", [this] { return static_cast<double>(hbm_.bytes); });
  st.value(n + ".l2.bytes", "B", [this] { return static_cast<double>(l2_.bytes); });
  st.counter(n + ".stall.outstanding_limit", "events", &outstanding_stalls_);
  st.counter(n + ".stall.throttled", "events", &throttle_stalls_);
  st.counter(n + ".throttle_packets", "packets", &throttles_);
  st.counter(n + ".served_requests", "packets", &served_requests_);
  st.counter(n + ".sync_requests", "packets", &sync_reqs_);
  st.histogram(n + ".sync_wait", "ns", &sync_wait_ns_);
  st.histogram(n + ".flag_wait", "ns", &flag_wait_ns_);
  st.histogram(n + ".remote_latency", "ns", &remote_latency_ns_);
  st.value(n + ".finish_time", "ps", [this] { return static_cast<double>(finish_ps_); });
  if (functional_) st.value(n + ".ld_value_sum", "value", [this] { return ld_value_sum_; });
  if (has_ports_)
    for (int t = 1; t < 20; ++t) {
      const auto type = static_cast<proto::PacketType>(t);
      if (type == proto::PKT_CREDIT) continue;
      const std::string tn = proto::PacketType_Name(type).substr(4);
      st.counter(n + ".tx." + tn + ".bytes", "B", &tx_bytes_[t]);
      st.counter(n + ".tx." + tn + ".packets", "packets", &tx_packets_[t]);
      st.counter(n + ".rx." + tn + ".bytes", "B", &rx_bytes_[t]);
      st.counter(n + ".rx." + tn + ".packets", "packets", &rx_packets_[t]);
    }
  for (const auto& L : launches_) {
    if (!L.mine) continue;
    const std::string k = n + ".kernel" + std::to_string(L.index) + "." + L.dk->k->name();
    const LaunchState* lp = &L;
    st.value(k + ".start", "ns", [lp] { return lp->start_ps == kNever ? -1.0 : lp->start_ps / 1000.0; });
    st.value(k + ".end", "ns", [lp] { return lp->end_ps / 1000.0; });
    st.value(k + ".release", "ns", [lp] { return lp->release_ps / 1000.0; });
    st.value(k + ".tbs", "blocks", [lp] { return static_cast<double>(lp->tbs); });
  }
}

// ------------------------------------------------------------------ launches
void HopperGpu::setup_launches() {
  const auto& wl = wl_->proto();
  launches_.resize(wl.launches_size());
  std::vector<int> last_on_stream_idx;
  std::unordered_map<std::uint32_t, std::uint32_t> last_on_stream;
  for (int i = 0; i < wl.launches_size(); ++i) {
    LaunchState& L = launches_[i];
    L.la = &wl.launches(i);
    L.dk = &wl_->kernels()[L.la->kernel()];
    L.index = i;
    L.mine = rank_ < wl.num_gpus() &&
             (L.la->gpus_size() == 0 || std::find(L.la->gpus().begin(), L.la->gpus().end(), rank_) != L.la->gpus().end());
    if (!L.mine) continue;
    const auto& k = *L.dk->k;
    L.sm_count = L.la->sm_count() ? L.la->sm_count() : cfg_.num_sms;
    L.sm_first = L.la->sm_count() ? L.la->sm_first() : 0;
    if (L.sm_first + L.sm_count > cfg_.num_sms)
      throw ConfigError("workload", "launch " + std::to_string(i) + " of '" + k.name() + "': SM partition [" +
                                        std::to_string(L.sm_first) + ", +" + std::to_string(L.sm_count) +
                                        ") exceeds gpu.num_sms=" + std::to_string(cfg_.num_sms));
    std::uint64_t bps = cfg_.max_blocks_per_sm;
    bps = std::min<std::uint64_t>(bps, cfg_.max_threads_per_sm / k.threads_per_block());
    if (k.regs_per_thread()) bps = std::min<std::uint64_t>(bps, cfg_.regs_per_sm / (k.regs_per_thread() * k.threads_per_block()));
    if (k.smem_bytes()) bps = std::min<std::uint64_t>(bps, cfg_.smem_per_sm / k.smem_bytes());
    if (bps == 0)
      throw ConfigError("workload", "kernel '" + k.name() + "' does not fit on an SM (threads " +
                                        std::to_string(k.threads_per_block()) + ", regs/thread " +
                                        std::to_string(k.regs_per_thread()) + ", smem " + std::to_string(k.smem_bytes()) + " B)");
    if (L.dk->uses_remote && !has_ports_ && wl.num_gpus() > 1)
      throw ConfigError("topology", name() + " has no NVLink port but kernel '" + k.name() + "' accesses peers");
    L.blocks_per_sm = static_cast<std::uint32_t>(bps);
    L.total = L.dk->num_blocks;
    L.ctas = k.persistent() ? std::min<std::uint32_t>(L.total, L.blocks_per_sm * L.sm_count) : L.total;
    L.block_done.assign(L.total, 0);
    if (k.cluster_ctas() > 1) {
      L.cluster_ctas = k.cluster_ctas();
      L.cluster_slots = cfg_.max_clusters_4 ? k.cluster_ctas() / 4 : 0;
      if (L.cluster_slots > cfg_.max_clusters_4)
        throw ConfigError("gpu.max_clusters_4", "kernel '" + k.name() + "' needs clusters of " +
                                                    std::to_string(k.cluster_ctas()) + " CTAs, more than " +
                                                    std::to_string(cfg_.max_clusters_4) + " 4-CTA cluster slots hold");
      for (std::uint32_t c = 0; c < L.ctas; c += L.cluster_ctas) L.cluster_left.push_back(std::min(L.cluster_ctas, L.ctas - c));
    }
    L.participants = k.cais().num_gpus() ? k.cais().num_gpus() : wl.num_gpus();
    L.prelaunch = k.cais().enabled() && k.cais().pre_launch_sync() && L.participants > 1 && has_ports_ && !k.persistent();
    if (L.prelaunch) {
      L.sync_ok.assign(L.ctas, 0);
      L.reg_ps.assign(L.ctas, 0);
    }
    auto it = last_on_stream.find(L.la->stream());
    if (it != last_on_stream.end()) {
      ++L.pending_preds;
      launches_[it->second].successors.push_back(i);
    }
    last_on_stream[L.la->stream()] = i;
    for (auto a : L.la->after())
      if (launches_[a].mine) {
        ++L.pending_preds;
        launches_[a].successors.push_back(i);
      }
    ++launches_left_;
  }
  for (auto& L : launches_)
    if (L.mine) dispatch_order_.push_back(L.index);
  std::stable_sort(dispatch_order_.begin(), dispatch_order_.end(), [this](std::uint32_t a, std::uint32_t b) {
    return launches_[a].la->priority() > launches_[b].la->priority();
  });
  for (auto& L : launches_)
    if (L.mine && L.pending_preds == 0) {
      L.from_host = true;
      release(L.index);
    }
}

void HopperGpu::release(std::uint32_t li) {
  LaunchState& L = launches_[li];
  TimePs t = std::max<TimePs>(sim_.now(), ns_to_ps(L.la->start_ns()));
  // Host launch skew only where the host enqueues (no predecessor on the device).
  if (L.from_host && cfg_.launch_skew_ps > 0) t += rng_() % cfg_.launch_skew_ps;
  L.release_ps = t;
  schedule(t + cfg_.kernel_launch_ps, kLaunchReady, li);
}

void HopperGpu::launch_ready(std::uint32_t li) {
  LaunchState& L = launches_[li];
  L.released = true;
  L.start_ps = sim_.now();
  // Dispatch after every launch released at this instant, so priorities decide among them.
  request_dispatch();
}

bool HopperGpu::deps_ready(const LaunchState& L, std::uint32_t block) const {
  for (const auto& d : L.la->deps()) {
    const LaunchState& P = launches_[d.producer()];
    if (!P.mine) continue;
    if (d.all_blocks()) {
      if (!P.done) return false;
      continue;
    }
    const std::int64_t base = static_cast<std::int64_t>(block) * d.scale_num() / d.scale_den();
    const std::int64_t lo = std::max<std::int64_t>(0, base + d.lo());
    const std::int64_t hi = std::min<std::int64_t>(static_cast<std::int64_t>(P.total) - 1, base + d.hi());
    for (std::int64_t b = lo; b <= hi; ++b)
      if (!P.block_done[b]) return false;
  }
  return true;
}

bool HopperGpu::fits(const SmState& sm, const LaunchState& L) const {
  const auto& k = *L.dk->k;
  return sm.blocks + 1 <= cfg_.max_blocks_per_sm && sm.threads + k.threads_per_block() <= cfg_.max_threads_per_sm &&
         sm.regs + k.regs_per_thread() * k.threads_per_block() <= cfg_.regs_per_sm &&
         sm.smem + k.smem_bytes() <= cfg_.smem_per_sm;
}

void HopperGpu::try_dispatch() {
  for (std::uint32_t li : dispatch_order_) {
    LaunchState& L = launches_[li];
    if (!L.released || L.done) continue;
    if (L.prelaunch) register_ahead(L);
    while (L.next_cta < L.ctas) {
      if (L.prelaunch && !L.sync_ok[L.next_cta]) break;
      if (!deps_ready(L, L.next_cta)) break;
      const bool new_cluster = L.cluster_slots && L.next_cta % L.cluster_ctas == 0;
      if (new_cluster && cluster_slots_used_ + L.cluster_slots > cfg_.max_clusters_4) break;
      std::uint32_t chosen = ~0u;
      for (std::uint32_t j = 0; j < L.sm_count; ++j) {
        const std::uint32_t s = L.sm_first + (L.sm_cursor + j) % L.sm_count;
        if (fits(sms_[s], L)) {
          chosen = s;
          break;
        }
      }
      if (chosen == ~0u) break;
      if (new_cluster) cluster_slots_used_ += L.cluster_slots;
      place(L, chosen);
      if (L.prelaunch) register_ahead(L);
    }
  }
}

void HopperGpu::register_ahead(LaunchState& L) {
  const std::uint32_t window = L.blocks_per_sm * L.sm_count;
  while (L.next_reg < L.ctas && L.next_reg < L.next_cta + window) {
    const std::uint32_t cta = L.next_reg++;
    const std::uint32_t group = L.dk->k->cais().group_base() + cta;
    sync_waiters_[group].push_back(kBlockWaiter | (static_cast<std::uint64_t>(L.index) << 32) | cta);
    L.reg_ps[cta] = sim_.now();
    send_sync(group, L.participants);
  }
}

void HopperGpu::place(LaunchState& L, std::uint32_t s) {
  const auto& k = *L.dk->k;
  SmState& sm = sms_[s];
  sm.blocks += 1;
  sm.threads += k.threads_per_block();
  sm.regs += k.regs_per_thread() * k.threads_per_block();
  sm.smem += k.smem_bytes();
  L.sm_cursor = (s - L.sm_first + 1) % L.sm_count;
  std::uint32_t tbi;
  if (free_tbs_.empty()) {
    tbi = static_cast<std::uint32_t>(tbs_.size());
    tbs_.emplace_back();
  } else {
    tbi = free_tbs_.back();
    free_tbs_.pop_back();
  }
  Tb& tb = tbs_[tbi];
  const std::uint32_t seq = tb.seq;  // keep the token: stale wake-ups of a previous block stay stale
  tb = Tb{};
  tb.seq = seq + 1;
  tb.launch = L.index;
  tb.sm = s;
  tb.cta = L.next_cta++;
  begin_block(tbi, tb.cta);
  const auto& c = k.cais();
  if (!L.prelaunch && c.enabled() && c.pre_launch_sync() && L.participants > 1 && has_ports_) {
    // persistent kernels: every CTA is resident on every GPU, so it can wait on its SM
    tb.state = TbState::kSyncLaunch;
    tb.wait_since = sim_.now();
    sync_waiters_[tb.group].push_back(tbi);
    send_sync(tb.group, L.participants);
  } else {
    schedule(sim_.now() + cfg_.tb_overhead_ps, kTbStart, tbi);
  }
}

void HopperGpu::begin_block(std::uint32_t tbi, std::uint32_t logical) {
  Tb& tb = tbs_[tbi];
  const LaunchState& L = launches_[tb.launch];
  tb.block = logical;
  tb.bx = logical % L.dk->k->grid_x();
  tb.by = logical / L.dk->k->grid_x();
  tb.pc = 0;
  tb.depth = 0;
  tb.group = L.dk->k->cais().group_base() + logical;
  tb.state = TbState::kRunning;
  if (cfg_.block_jitter_frac > 0) {
    std::normal_distribution<double> n(1.0, cfg_.block_jitter_frac);
    tb.jitter = std::clamp(n(rng_), 0.5, 1.5);
  }
  ++launches_[tb.launch].tbs;
}

std::uint32_t HopperGpu::participants_excluding(const LaunchState& L, std::uint32_t owner) const {
  const auto& c = L.dk->k->cais();
  const std::uint32_t first = c.first_gpu();
  const bool owner_in = owner >= first && owner < first + L.participants;
  return owner_in ? L.participants - 1 : L.participants;
}

// ------------------------------------------------------------------ execution
void HopperGpu::handle(const Event& e) {
  switch (e.kind) {
    case kPacketArrival: return on_arrival(static_cast<PacketHandle>(e.arg));
    case kTbStep: {
      Tb& tb = tbs_[e.arg];
      if (e.arg32 != tb.seq) return;  // superseded by a later wake-up
      if (tb.state == TbState::kWaitMem) tb.state = TbState::kRunning;
      return step(static_cast<std::uint32_t>(e.arg));
    }
    case kTbStart:
      tbs_[e.arg].state = TbState::kRunning;
      ++tbs_[e.arg].seq;
      return step(static_cast<std::uint32_t>(e.arg));
    case kMemDone: return mem_op_done(static_cast<std::uint32_t>(e.arg));
    case kPortFree: return pump_port(e.arg32);
    case kLaunchReady: return launch_ready(static_cast<std::uint32_t>(e.arg));
    case kDispatch:
      dispatch_pending_ = false;
      return try_dispatch();
    case kRespond: return respond(static_cast<PacketHandle>(e.arg));
    case kPumpSm:
      sms_[e.arg32].pump_pending = false;
      return pump_sm(e.arg32);
    default: throw InvariantError(name() + ": unknown event kind");
  }
}

void HopperGpu::add_local(std::uint32_t tbi, TimePs done) {
  Tb& tb = tbs_[tbi];
  mem_satisfied(tb, ~0u);  // prune completed entries
  if (tb.nlocal < tb.local.size()) {
    tb.local[tb.nlocal++] = done;
  } else {  // more in flight than the block tracks: an event of its own
    ++tb.outstanding;
    schedule(done, kMemDone, tbi);
  }
}

bool HopperGpu::mem_satisfied(Tb& tb, std::uint32_t limit) {
  const TimePs now = sim_.now();
  std::uint8_t k = 0;
  for (std::uint8_t i = 0; i < tb.nlocal; ++i)
    if (tb.local[i] > now) tb.local[k++] = tb.local[i];
  tb.nlocal = k;
  return tb.outstanding + tb.nlocal <= limit;
}

// Wake the block when at most `limit` memory ops are in flight: exactly at the right local
// completion when only local ops are pending; otherwise on remote completions (and when the
// local ones are done), re-checking each time.
void HopperGpu::wait_mem(std::uint32_t tbi, std::uint32_t limit) {
  Tb& tb = tbs_[tbi];
  tb.state = TbState::kWaitMem;
  tb.wait_limit = limit;
  if (tb.nlocal == 0) return;  // remote completions wake it (mem_op_done)
  std::array<TimePs, 16> t = tb.local;
  std::sort(t.begin(), t.begin() + tb.nlocal);
  if (tb.outstanding == 0) {
    wake_at(tbi, t[tb.nlocal - 1 - std::min<std::uint32_t>(limit, tb.nlocal - 1)]);
  } else {
    tb.wait_limit = limit >= tb.nlocal ? limit - tb.nlocal : 0;
    wake_at(tbi, t[tb.nlocal - 1]);
  }
}

void HopperGpu::mem_op_done(std::uint32_t tbi) {
  Tb& tb = tbs_[tbi];
  if (tb.outstanding == 0) throw InvariantError(name() + ": memory completion without an outstanding op");
  --tb.outstanding;
  if (tb.state == TbState::kWaitMem && tb.outstanding <= tb.wait_limit) {
    tb.state = TbState::kRunning;
    wake(tbi);
  }
}

void HopperGpu::step(std::uint32_t tbi) {
  Tb& tb = tbs_[tbi];
  if (tb.state != TbState::kRunning) return;  // a stale wake-up
  LaunchState& L = launches_[tb.launch];
  const auto& prog = L.dk->k->program();
  const auto n = static_cast<std::uint32_t>(prog.size());
  const std::int64_t g = rank_;
  for (;;) {
    if (tb.wait0) {
      if (!mem_satisfied(tb, 0)) return wait_mem(tbi, 0);
      tb.wait0 = false;
    }
    if (tb.pc >= n) return finish_block(tbi);
    const isa::Instr& ins = prog.Get(static_cast<int>(tb.pc));
    switch (ins.op()) {
      case isa::LOOP:
        if (ins.count() == 0) {
          tb.pc = L.dk->match[tb.pc] + 1;
        } else {
          tb.loops[tb.depth++] = 0;
          ++tb.pc;
        }
        break;
      case isa::ENDLOOP: {
        const std::uint32_t head = L.dk->match[tb.pc];
        if (++tb.loops[tb.depth - 1] < prog.Get(static_cast<int>(head)).count()) {
          tb.pc = head + 1;
        } else {
          --tb.depth;
          ++tb.pc;
        }
        break;
      }
      case isa::MMA: {
        double rate = cfg_.tc_flops_per_cycle * cfg_.tc_efficiency * cfg_.clock_ghz / 1000.0;  // FLOP/ps
        if (ins.dtype() == isa::FP8) rate *= 2;
        if (ins.dtype() == isa::FP32) rate *= 0.5;
        const double flops = 2.0 * ins.m() * ins.n() * ins.k();
        mma_flops_ += static_cast<std::uint64_t>(flops);
        SmState& sm = sms_[tb.sm];
        const TimePs start = std::max(sim_.now(), sm.tc_busy);
        sm.tc_busy = start + static_cast<TimePs>(flops / rate * tb.jitter + 0.5);
        ++tb.pc;
        wake_at(tbi, sm.tc_busy);
        return;
      }
      case isa::ALU: {
        const double flops = static_cast<double>(ins.elements()) * ins.flops_per_element();
        alu_flops_ += static_cast<std::uint64_t>(flops);
        SmState& sm = sms_[tb.sm];
        const TimePs start = std::max(sim_.now(), sm.alu_busy);
        sm.alu_busy = start + static_cast<TimePs>(flops / (cfg_.alu_flops_per_cycle * cfg_.clock_ghz / 1000.0) * tb.jitter + 0.5);
        ++tb.pc;
        wake_at(tbi, sm.alu_busy);
        return;
      }
      case isa::LD:
      case isa::ST:
      case isa::LD_REMOTE:
      case isa::ST_REMOTE:
      case isa::LD_CAIS:
      case isa::RED_CAIS:
      case isa::MM_LD_REDUCE:
      case isa::MM_ST:
      case isa::MM_RED:
      case isa::DMA_COPY:
      case isa::DMA_REDUCE: {
        const bool unicast_remote = ins.op() == isa::LD_REMOTE || ins.op() == isa::ST_REMOTE ||
                                    ins.op() == isa::LD_CAIS || ins.op() == isa::RED_CAIS ||
                                    ins.op() == isa::DMA_COPY || ins.op() == isa::DMA_REDUCE;
        const bool multimem = ins.op() == isa::MM_LD_REDUCE || ins.op() == isa::MM_ST || ins.op() == isa::MM_RED;
        const auto peer = unicast_remote ? static_cast<std::uint32_t>(eval_affine(ins.peer(), tb.bx, tb.by, g, tb.loops.data(), tb.depth)) : rank_;
        if (unicast_remote && peer >= wl_->proto().num_gpus())
          throw InvariantError(name() + ": kernel '" + L.dk->k->name() + "' pc " + std::to_string(tb.pc) + " peer " +
                               std::to_string(peer) + " out of range");
        if (multimem || (unicast_remote && peer != rank_)) {
          issue_remote(tbi, ins, ins.op() == isa::DMA_COPY || ins.op() == isa::DMA_REDUCE ? cfg_.num_sms : tb.sm);
        } else {
          // Local access (also a .cais / remote op whose owner is this GPU).
          const auto& B = wl_->buffers()[ins.buffer()];
          const std::uint64_t off = static_cast<std::uint64_t>(eval_affine(ins.addr(), tb.bx, tb.by, g, tb.loops.data(), tb.depth));
          const std::uint32_t rows = std::max<std::uint32_t>(1, ins.rows());
          const std::uint64_t bytes = static_cast<std::uint64_t>(rows) * ins.row_bytes();
          const bool write = ins.op() == isa::ST || ins.op() == isa::ST_REMOTE || ins.op() == isa::RED_CAIS ||
                             ins.op() == isa::DMA_COPY || ins.op() == isa::DMA_REDUCE;
          const std::uint64_t key = mix64(mix64((static_cast<std::uint64_t>(ins.buffer()) << 32) ^ off) ^
                                          (static_cast<std::uint64_t>(rows) << 40) ^ (static_cast<std::uint64_t>(ins.row_bytes()) << 8) ^
                                          ins.row_stride());
          TimePs t = local_access(tb.sm, key, bytes, write);
          if (ins.op() == isa::DMA_COPY || ins.op() == isa::DMA_REDUCE) {  // local copy: read the source too
            const std::uint64_t soff = static_cast<std::uint64_t>(eval_affine(ins.src_addr(), tb.bx, tb.by, g, tb.loops.data(), tb.depth));
            t = std::max(t, local_access(tb.sm, mix64(soff ^ (static_cast<std::uint64_t>(ins.src_buffer()) << 32)), bytes, false));
            if (functional_) {
              for (std::uint32_t r = 0; r < rows; ++r) {
                const std::uint64_t stride = ins.row_stride() ? ins.row_stride() : ins.row_bytes();
                const auto& S = wl_->buffers()[ins.src_buffer()];
                for (std::uint64_t b = 0; b < ins.row_bytes(); b += B.elem_bytes) {
                  const double v = mem_[ins.src_buffer()].at((soff + r * stride + b) / S.elem_bytes);
                  double& d = mem_[ins.buffer()].at((off + r * stride + b) / B.elem_bytes);
                  d = ins.op() == isa::DMA_REDUCE ? d + v : v;
                }
              }
            }
          } else if (functional_) {
            const double v = ins.value() ? static_cast<double>(ins.value()) : static_cast<double>(rank_ + 1);
            if (write) fill_local(ins.buffer(), off, rows, ins.row_bytes(), ins.row_stride(), v, ins.op() == isa::RED_CAIS);
            else ld_value_sum_ += sum_local(ins.buffer(), off, rows, ins.row_bytes(), ins.row_stride());
          }
          (write ? st_bytes_ : ld_bytes_) += bytes;
          add_local(tbi, t);
        }
        ++tb.pc;
        if (!ins.is_async()) tb.wait0 = true;  // checked at the top of the loop
        break;
      }
      case isa::WAIT:
      case isa::BAR: {
        const std::uint32_t limit = ins.op() == isa::WAIT ? ins.count() : 0;
        if (!mem_satisfied(tb, limit)) return wait_mem(tbi, limit);  // re-evaluated on wake-up
        ++tb.pc;
        break;
      }
      case isa::FLAG_WAIT: {
        const std::uint64_t key = wl_->buffers()[ins.buffer()].base +
                                  static_cast<std::uint64_t>(eval_affine(ins.addr(), tb.bx, tb.by, g, tb.loops.data(), tb.depth));
        auto it = flags_.find(key);
        if (it != flags_.end() && it->second >= ins.value()) {
          if (tb.wait_since) flag_wait_ns_.add(static_cast<double>(sim_.now() - tb.wait_since) / 1000.0);
          tb.wait_since = 0;
          ++tb.pc;
          break;
        }
        if (!tb.wait_since) tb.wait_since = std::max<TimePs>(1, sim_.now());
        tb.state = TbState::kWaitFlag;
        flag_waiters_[key].push_back(tbi);
        return;
      }
      case isa::FLAG_SIGNAL: {
        const auto peer = ins.scope() == isa::REMOTE ? static_cast<std::uint32_t>(eval_affine(ins.peer(), tb.bx, tb.by, g, tb.loops.data(), tb.depth)) : rank_;
        if (peer != rank_) {
          issue_remote(tbi, ins, tb.sm);
        } else {
          flag_add(wl_->buffers()[ins.buffer()].base +
                       static_cast<std::uint64_t>(eval_affine(ins.addr(), tb.bx, tb.by, g, tb.loops.data(), tb.depth)),
                   ins.value());
        }
        ++tb.pc;
        break;
      }
      case isa::CAIS_SYNC: {
        ++tb.pc;
        const auto& c = L.dk->k->cais();
        if (!c.enabled() || !c.pre_access_sync() || L.participants <= 1 || !has_ports_) break;
        tb.state = TbState::kWaitSync;
        tb.wait_since = sim_.now();
        sync_waiters_[tb.group].push_back(tbi);
        send_sync(tb.group, L.participants);
        return;
      }
      default:
        throw InvariantError(name() + ": unsupported opcode " + opcode_name(ins.op()));
    }
  }
}

void HopperGpu::finish_block(std::uint32_t tbi) {
  Tb& tb = tbs_[tbi];
  if (!mem_satisfied(tb, 0)) return wait_mem(tbi, 0);  // a block retires when its memory ops are done
  LaunchState& L = launches_[tb.launch];
  L.block_done[tb.block] = 1;
  ++L.done_blocks;
  ++tbs_done_;
  const std::uint32_t next = tb.block + L.ctas;
  if (L.dk->k->persistent() && next < L.total) {
    begin_block(tbi, next);
    if (deps_ready(L, next)) {
      tb.state = TbState::kSyncLaunch;  // not runnable until kTbStart
      schedule(sim_.now() + cfg_.tb_overhead_ps, kTbStart, tbi);
    } else {
      tb.state = TbState::kWaitDep;
      L.dep_waiters.push_back(tbi);
    }
  } else {
    const auto& k = *L.dk->k;
    SmState& sm = sms_[tb.sm];
    sm.blocks -= 1;
    sm.threads -= k.threads_per_block();
    sm.regs -= k.regs_per_thread() * k.threads_per_block();
    sm.smem -= k.smem_bytes();
    tb.state = TbState::kFree;
    free_tbs_.push_back(tbi);
    if (L.cluster_slots && --L.cluster_left[tb.cta / L.cluster_ctas] == 0) cluster_slots_used_ -= L.cluster_slots;
    if (++L.retired_ctas == L.ctas) launch_done(L);
  }
  block_retired(L, 0);
}

void HopperGpu::block_retired(LaunchState& P, std::uint32_t) {
  // Persistent consumers parked on dependencies re-check; others dispatch in order.
  for (std::uint32_t li : dispatch_order_) {
    LaunchState& C = launches_[li];
    if (C.dep_waiters.empty()) continue;
    std::vector<std::uint32_t> still;
    for (std::uint32_t t : C.dep_waiters) {
      if (deps_ready(C, tbs_[t].block)) {
        tbs_[t].state = TbState::kSyncLaunch;
        schedule(sim_.now() + cfg_.tb_overhead_ps, kTbStart, t);
      } else {
        still.push_back(t);
      }
    }
    C.dep_waiters.swap(still);
  }
  try_dispatch();
}

void HopperGpu::launch_done(LaunchState& L) {
  L.done = true;
  L.end_ps = sim_.now();
  finish_ps_ = std::max(finish_ps_, sim_.now());
  --launches_left_;
  for (std::uint32_t s : L.successors)
    if (--launches_[s].pending_preds == 0) release(s);
}

bool HopperGpu::done() const { return launches_left_ == 0 && ops_live_ == 0; }

std::string HopperGpu::blocked_reason() const {
  if (done()) return {};
  std::ostringstream os;
  os << launches_left_ << " launches unfinished, " << ops_live_ << " remote ops in flight";
  std::size_t sync = 0, flag = 0, dep = 0;
  for (const auto& kv : sync_waiters_) sync += kv.second.size();
  for (const auto& kv : flag_waiters_) flag += kv.second.size();
  for (const auto& L : launches_) dep += L.dep_waiters.size();
  os << "; blocks waiting: " << sync << " on group sync, " << flag << " on flags, " << dep << " on dependencies";
  for (const auto& L : launches_)
    if (L.mine && !L.done) {
      os << "; first unfinished launch " << L.index << " '" << L.dk->k->name() << "' (" << L.done_blocks << "/" << L.total
         << " blocks done, " << (L.released ? "released" : "waiting for predecessors") << ")";
      break;
    }
  return os.str();
}

void HopperGpu::check_drained() const {
  for (const auto& o : out_)
    if (o.connected() && !o.all_credits_home()) throw InvariantError(name() + ": credits not returned at end of run");
  if (ops_live_ != 0) throw InvariantError(name() + ": remote operations left in flight at end of run");
}

}  // namespace cais::gpu
