// Thread-block scheduler: launches, occupancy, dispatch order, dependencies, retirement.
#include "cais/gpu/tb_scheduler.h"

#include <algorithm>
#include <unordered_map>

#include "cais/errors.h"
#include "cais/gpu/block_executor.h"
#include "cais/gpu/l1_staging.h"
#include "cais/gpu/local_memory.h"
#include "cais/gpu/sync_flags.h"

namespace cais::gpu {

TbScheduler::TbScheduler(GpuContext& ctx) : ctx_(ctx), draws_(ctx.sim, ctx.name()) {
  sms_.resize(ctx.cfg.num_sms);
}

void TbScheduler::setup() {
  const auto& wl = ctx_.wl.proto();
  const HopperConfig& cfg = ctx_.cfg;
  launches_.resize(wl.launches_size());
  std::unordered_map<std::uint32_t, std::uint32_t> last_on_stream;
  for (int i = 0; i < wl.launches_size(); ++i) {
    LaunchState& L = launches_[i];
    L.la = &wl.launches(i);
    L.dk = &ctx_.wl.kernels()[L.la->kernel()];
    L.index = i;
    L.mine = ctx_.rank < wl.num_gpus() &&
             (L.la->gpus_size() == 0 || std::find(L.la->gpus().begin(), L.la->gpus().end(), ctx_.rank) != L.la->gpus().end());
    if (!L.mine) continue;
    const auto& k = *L.dk->k;
    for (const auto& d : L.la->deps())
      if (!launches_[d.producer()].mine)
        throw ConfigError("workload", "launch " + std::to_string(i) + " of " + quote(k.name()) + " depends on launch " +
                                          std::to_string(d.producer()) + " of '" +
                                          ctx_.wl.kernels()[wl.launches(d.producer()).kernel()].k->name() +
                                          "', which does not run on GPU " + std::to_string(ctx_.rank) +
                                          " (cross-GPU readiness: flag.signal / flag.wait)");
    L.sm_count = L.la->sm_count() ? L.la->sm_count() : cfg.num_sms;
    L.sm_first = L.la->sm_count() ? L.la->sm_first() : 0;
    if (L.sm_first + L.sm_count > cfg.num_sms)
      throw ConfigError("workload", "launch " + std::to_string(i) + " of " + quote(k.name()) + ": SM partition [" +
                                        std::to_string(L.sm_first) + ", +" + std::to_string(L.sm_count) +
                                        ") exceeds gpu.num_sms=" + std::to_string(cfg.num_sms));
    std::uint64_t bps = cfg.max_blocks_per_sm;
    bps = std::min<std::uint64_t>(bps, cfg.max_threads_per_sm / k.threads_per_block());
    if (k.regs_per_thread()) bps = std::min<std::uint64_t>(bps, cfg.regs_per_sm / (k.regs_per_thread() * k.threads_per_block()));
    if (k.smem_bytes()) bps = std::min<std::uint64_t>(bps, cfg.smem_per_sm / k.smem_bytes());
    if (bps == 0)
      throw ConfigError("workload", "kernel " + quote(k.name()) + " does not fit on an SM (threads " +
                                        std::to_string(k.threads_per_block()) + ", regs/thread " +
                                        std::to_string(k.regs_per_thread()) + ", smem " + std::to_string(k.smem_bytes()) + " B)");
    if (L.dk->uses_remote && !ctx_.has_ports && wl.num_gpus() > 1)
      throw ConfigError("topology", ctx_.name() + " has no NVLink port but kernel " + quote(k.name()) + " accesses peers");
    if (!k.persistent() && (k.ctas() || k.dynamic_blocks()))
      throw ConfigError("workload", "kernel " + quote(k.name()) + ": ctas and dynamic_blocks belong to a persistent kernel");
    L.blocks_per_sm = static_cast<std::uint32_t>(bps);
    L.sm_share = std::max({static_cast<double>(k.threads_per_block()) / cfg.max_threads_per_sm,
                           static_cast<double>(k.regs_per_thread()) * k.threads_per_block() / cfg.regs_per_sm,
                           static_cast<double>(k.smem_bytes()) / static_cast<double>(cfg.smem_per_sm),
                           1.0 / cfg.max_blocks_per_sm});
    L.total = L.dk->num_blocks;
    L.ctas = !k.persistent() ? L.total
             : k.ctas()      ? k.ctas()  // CTAs without a block of their own may still have a continuation
                             : std::min<std::uint32_t>(L.total, L.blocks_per_sm * L.sm_count);
    L.next_logical = 0;  // dynamic_blocks: the first block of the next group a cluster takes
    if (k.dynamic_blocks()) {
      L.dyn_groups.assign((L.ctas + std::max(1u, k.cluster_ctas()) - 1) / std::max(1u, k.cluster_ctas()), {});
      L.dyn_begun.assign(L.ctas, 0);
    }
    if (k.warp_groups_size() > 1) L.groups_left.assign(L.ctas, static_cast<std::uint8_t>(k.warp_groups_size()));
    L.block_done.assign(L.total, 0);
    L.row_done.assign(k.grid_y(), 0);
    L.col_done.assign(k.grid_x(), 0);
    if (k.cluster_ctas() > 1) {
      L.cluster_ctas = k.cluster_ctas();
      L.cluster_slots = cfg.max_clusters_4 ? k.cluster_ctas() / 4 : 0;
      if (L.cluster_slots > cfg.max_clusters_4)
        throw ConfigError("gpu.max_clusters_4", "kernel " + quote(k.name()) + " needs clusters of " +
                                                    std::to_string(k.cluster_ctas()) + " CTAs, more than " +
                                                    std::to_string(cfg.max_clusters_4) + " 4-CTA cluster slots hold");
      for (std::uint32_t c = 0; c < L.ctas; c += L.cluster_ctas) L.cluster_left.push_back(std::min(L.cluster_ctas, L.ctas - c));
    }
    L.participants = k.cais().num_gpus() ? k.cais().num_gpus() : wl.num_gpus();
    L.prelaunch = k.cais().enabled() && k.cais().pre_launch_sync() && L.participants > 1 && ctx_.has_ports && !k.persistent();
    // Blocks leave raster order (not clusters, which go as units, nor the resident CTAs of a
    // persistent kernel, which are all placed at launch).
    if (k.row_interleave() > 1 && L.cluster_ctas == 1 && !k.persistent())
      L.order = interleaved_rows(k.grid_x(), k.grid_y(), k.row_interleave(), k.name(), k.interleave_blocks());
    if (cfg.tb_order_window > 1 && L.cluster_ctas == 1 && !k.persistent()) {
      std::vector<std::uint32_t> w = windowed_order(L.ctas, cfg.tb_order_window, draws_, L.index);
      if (!L.order.empty())
        for (auto& pos : w) pos = L.order[pos];  // the jitter acts on the swizzled order
      L.order = std::move(w);
    }
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
    if (L.la->continues()) setup_continuation(L);
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

void TbScheduler::setup_continuation(LaunchState& C) {
  const auto& k = *C.dk->k;
  const std::uint32_t pi = C.la->continues() - 1, off = C.la->continue_offset();
  auto bad = [&](const std::string& why) {
    return ConfigError("workload", "launch " + std::to_string(C.index) + " of " + quote(k.name()) +
                                       " continues launch " + std::to_string(pi) + ": " + why);
  };
  if (pi >= C.index || !launches_[pi].mine) throw bad("that must be an earlier launch on the same GPUs");
  LaunchState& P = launches_[pi];
  if (C.pending_preds || C.la->deps_size() || C.la->start_ns() != P.la->start_ns())
    throw bad("it starts with that launch: no stream predecessor, after or deps, the same start_ns");
  if (k.warp_groups_size() || P.dk->k->warp_groups_size())
    throw bad("a warp-specialised kernel neither continues nor is continued");
  if (k.persistent() || C.prelaunch || C.cluster_ctas != P.cluster_ctas || off % std::max(1u, P.cluster_ctas))
    throw bad("its CTAs take over that launch's, so it is not persistent, has no pre-launch sync, the same "
              "clusters, and an offset of whole clusters");
  if (off + C.ctas > P.ctas) throw bad("it has more CTAs than that launch from offset " + std::to_string(off));
  C.continuation = true;
  P.continuations.emplace_back(C.index, off);
}

void TbScheduler::release(std::uint32_t li) {
  LaunchState& L = launches_[li];
  TimePs t = std::max<TimePs>(ctx_.now(), ns_to_ps(L.la->start_ns()));
  // Host launch skew only where the host enqueues (no predecessor on the device). One offset per
  // GPU, not per launch: a GPU's host thread enqueues its launches in order, so they shift
  // together and are never reordered against each other.
  if (L.from_host && ctx_.cfg.launch_skew_ps > 0)
    t += static_cast<TimePs>(draws_.uniform(DriftSource::kLaunchSkew, 0) * static_cast<double>(ctx_.cfg.launch_skew_ps));
  L.release_ps = t;
  ctx_.schedule(t + ctx_.cfg.kernel_launch_ps, kLaunchReady, li);
}

void TbScheduler::on_launch_ready(std::uint32_t li) {
  LaunchState& L = launches_[li];
  L.released = true;
  L.start_ps = ctx_.now();
  if (L.dk->uses_mma) {  // a continuation counts too: its CTAs run after its parent's are done
    L.counted_mma = true;
    if (mma_running_++ == 0) set_clock(ctx_.cfg.clock_ghz);
  }
  // Dispatch after every launch released at this instant, so priorities decide among them.
  request_dispatch();
}

void TbScheduler::request_dispatch() {
  if (!dispatch_pending_) {
    dispatch_pending_ = true;
    ctx_.schedule(ctx_.now(), kDispatch);
  }
}

bool TbScheduler::deps_ready(const LaunchState& L, std::uint32_t block) const {
  const std::uint32_t gx = L.dk->k->grid_x();
  for (const auto& d : L.la->deps()) {
    const LaunchState& P = launches_[d.producer()];  // on this GPU: checked by setup()
    if (d.all_blocks()) {
      if (!P.done) return false;
      continue;
    }
    // The consumer's coordinate the range is keyed on, and the producer's extent along it.
    std::int64_t coord = block, extent = P.total;
    const std::vector<std::uint32_t>* counts = nullptr;  // done blocks per row / column
    std::uint32_t full = 0;                               // blocks in a full row / column
    if (d.key() == isa::ROW) {
      coord = block / gx;
      extent = P.dk->k->grid_y();
      counts = &P.row_done;
      full = P.dk->k->grid_x();
    } else if (d.key() == isa::COLUMN) {
      coord = block % gx;
      extent = P.dk->k->grid_x();
      counts = &P.col_done;
      full = P.dk->k->grid_y();
    }
    const std::int64_t base = coord * d.scale_num() / d.scale_den();
    const std::int64_t lo = std::max<std::int64_t>(0, base + d.lo());
    const std::int64_t hi = std::min<std::int64_t>(extent - 1, base + d.hi());
    for (std::int64_t i = lo; i <= hi; ++i)
      if (counts ? (*counts)[i] < full : !P.block_done[i]) return false;
  }
  return true;
}

bool TbScheduler::fits(const SmOccupancy& sm, const LaunchState& L) const {
  const auto& k = *L.dk->k;
  const HopperConfig& cfg = ctx_.cfg;
  return sm.blocks + 1 <= cfg.max_blocks_per_sm && sm.threads + k.threads_per_block() <= cfg.max_threads_per_sm &&
         sm.regs + k.regs_per_thread() * k.threads_per_block() <= cfg.regs_per_sm &&
         sm.smem + k.smem_bytes() <= cfg.smem_per_sm;
}

void TbScheduler::on_dispatch() {
  dispatch_pending_ = false;
  dispatch();
}

void TbScheduler::dispatch() {
  for (std::uint32_t li : dispatch_order_) {
    LaunchState& L = launches_[li];
    if (!L.released || L.done || L.continuation) continue;
    if (L.prelaunch) register_ahead(L);
    const bool dynamic = L.dk->k->dynamic_blocks();
    while (L.next_cta < L.ctas) {
      const std::uint32_t cta = cta_at(L, L.next_cta);
      if (L.prelaunch && !L.sync_ok[cta]) break;
      // the block it starts with: its own, or a dynamic kernel's next one (if any is left)
      const std::uint32_t first = dynamic ? L.next_logical : cta;
      if (first < L.total && !deps_ready(L, first)) break;
      const bool new_cluster = L.cluster_slots && L.next_cta % L.cluster_ctas == 0;
      if (new_cluster && cluster_slots_used_ + L.cluster_slots > ctx_.cfg.max_clusters_4) break;
      if (L.cluster_ctas == kSmsPerTpc && L.next_cta + 1 < L.ctas) {
        // A 2-CTA cluster goes as a unit onto both SMs of one TPC (66 such clusters fit the
        // 132-SM H100: cuOccupancyMaxActiveClusters, h100_partitions_clusters.csv).
        const std::uint32_t mate = cta_at(L, L.next_cta + 1), mate_first = dynamic ? first + 1 : mate;
        if ((L.prelaunch && !L.sync_ok[mate]) || (mate_first < L.total && !deps_ready(L, mate_first))) break;
        const std::uint32_t s = pick_tpc(L);
        if (s == ~0u) break;
        place(L, s);
        place(L, s + 1);
      } else {
        const std::uint32_t s = pick_sm(L);
        if (s == ~0u) break;
        if (new_cluster) cluster_slots_used_ += L.cluster_slots;
        place(L, s);
      }
      if (L.prelaunch) register_ahead(L);
    }
  }
}

void TbScheduler::register_ahead(LaunchState& L) {
  const std::uint32_t window = L.blocks_per_sm * L.sm_count;
  while (L.next_reg < L.ctas && L.next_reg < L.next_cta + window) {
    const std::uint32_t cta = cta_at(L, L.next_reg++);
    const std::uint32_t group = L.dk->k->cais().group_base() + cta;
    ctx_.sync->wait_block(group, L.index, cta);
    L.reg_ps[cta] = ctx_.now();
    ctx_.sync->request(group, L.participants);
  }
}

void TbScheduler::prelaunch_released(std::uint32_t launch, std::uint32_t cta) {
  launches_[launch].sync_ok[cta] = 1;
  request_dispatch();
}

void TbScheduler::place(LaunchState& L, std::uint32_t s) {
  start_cta(occupy(L, s, cta_at(L, L.next_cta++)));
}

// CTA `cta` of L takes SM s: its resources and a block slot.
std::uint32_t TbScheduler::occupy(LaunchState& L, std::uint32_t s, std::uint32_t cta) {
  const auto& k = *L.dk->k;
  SmOccupancy& sm = sms_[s];
  const bool empty = sm.blocks == 0;
  sm.blocks += 1;
  sm.threads += k.threads_per_block();
  sm.regs += k.regs_per_thread() * k.threads_per_block();
  sm.smem += k.smem_bytes();
  const std::uint32_t holder = ctx_.l1->config_launch(s);
  const bool keep = holder != L1Staging::kNoLaunch && holder != L.index && launches_[holder].dk->k->holds_carveout() &&
                    !launches_[holder].done;
  ctx_.l1->take_block(s, L.index, sm.smem, empty, keep, k.holds_carveout());
  if (L.first_cta_ps == kNever) L.first_cta_ps = ctx_.now();
  const std::uint32_t tbi = new_tb();
  Tb& tb = tbs_[tbi];
  tb.launch = L.index;
  tb.sm = s;
  tb.cta = cta;
  tb.slot_launch = L.index;
  tb.slot_cta = cta;
  tb.placed_ps = ctx_.now();
  return tbi;
}

// A fresh thread-block record (reused when one is free).
std::uint32_t TbScheduler::new_tb() {
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
  return tbi;
}

// A warp-specialised CTA's other groups begin its block beside group 0 (`tbi`), on its SM and
// within the resources it holds.
void TbScheduler::start_warp_groups(std::uint32_t tbi) {
  const auto groups = static_cast<std::uint32_t>(launches_[tbs_[tbi].launch].dk->programs.size());
  for (std::uint32_t r = 1; r < groups; ++r) {
    const std::uint32_t t = new_tb();  // may move tbs_: copy from the index
    const Tb& lead = tbs_[tbi];
    Tb& tb = tbs_[t];
    tb.launch = lead.launch;
    tb.sm = lead.sm;
    tb.cta = lead.cta;
    tb.slot_launch = lead.slot_launch;
    tb.slot_cta = lead.slot_cta;
    tb.placed_ps = lead.placed_ps;
    tb.role = r;
    begin_block(t, lead.block);
    ctx_.schedule(ctx_.now() + ctx_.cfg.tb_overhead_ps, kTbStart, t);
  }
}

// A placed CTA begins its first block: its own, or a dynamic kernel's next one; a dynamic CTA
// that finds none left leaves at once (handing its SM to a continuation).
void TbScheduler::start_cta(std::uint32_t tbi) {
  Tb& tb = tbs_[tbi];
  LaunchState& L = launches_[tb.launch];
  const auto& k = *L.dk->k;
  const std::uint32_t first = k.dynamic_blocks() ? next_dynamic_block(L, tb.cta) : tb.cta;
  if (first >= L.total) return exit_cta(tbi);  // a persistent CTA with no block (left)
  begin_block(tbi, first);
  if (k.dynamic_blocks() && !deps_ready(L, first)) {  // a cluster mate whose block is not ready
    tb.state = TbState::kWaitDep;
    L.dep_waiters.push_back(tbi);
    return;
  }
  const auto& c = k.cais();
  if (!L.prelaunch && c.enabled() && c.pre_launch_sync() && L.participants > 1 && ctx_.has_ports) {
    // persistent kernels: every CTA is resident on every GPU, so it can wait on its SM
    tb.state = TbState::kSyncLaunch;
    tb.wait_since = ctx_.now();
    ctx_.sync->wait_tb(tb.group, tbi);
    ctx_.sync->request(tb.group, L.participants);
  } else {
    ctx_.schedule(ctx_.now() + ctx_.cfg.tb_overhead_ps, kTbStart, tbi);
    if (!L.groups_left.empty()) start_warp_groups(tbi);
  }
}

// A CTA with no block left frees its SM, or hands it to the launch that continues it.
void TbScheduler::exit_cta(std::uint32_t tbi) {
  Tb& tb = tbs_[tbi];
  LaunchState& L = launches_[tb.launch];
  const auto& k = *L.dk->k;
  const std::uint32_t s = tb.sm, cta = tb.cta, slot_launch = tb.slot_launch, slot_cta = tb.slot_cta;
  SmOccupancy& sm = sms_[s];
  sm.blocks -= 1;
  sm.threads -= k.threads_per_block();
  sm.regs -= k.regs_per_thread() * k.threads_per_block();
  sm.smem -= k.smem_bytes();
  L.resident_ps += ctx_.now() - tb.placed_ps;
  tb.state = TbState::kFree;
  free_tbs_.push_back(tbi);
  LaunchState* next = nullptr;
  std::uint32_t next_cta = 0;
  for (const auto& [ci, off] : L.continuations)
    if (cta >= off && cta - off < launches_[ci].ctas) {
      next = &launches_[ci];
      next_cta = cta - off;
      break;
    }
  if (!next) {  // it leaves its cluster
    LaunchState& O = launches_[slot_launch];
    if (O.cluster_slots && --O.cluster_left[slot_cta / O.cluster_ctas] == 0) cluster_slots_used_ -= O.cluster_slots;
  }
  if (++L.retired_ctas == L.ctas) launch_done(L);
  if (!next) return;
  if (!next->released || !fits(sm, *next))
    throw InvariantError(ctx_.name() + ": launch " + std::to_string(next->index) + " cannot continue CTA " +
                         std::to_string(cta) + " of launch " + std::to_string(L.index) +
                         (next->released ? " (its CTA does not fit the SM)" : " (not launched yet)"));
  ++next->next_cta;
  const std::uint32_t t = occupy(*next, s, next_cta);
  tbs_[t].slot_launch = slot_launch;
  tbs_[t].slot_cta = slot_cta;
  start_cta(t);
}

void TbScheduler::begin_block(std::uint32_t tbi, std::uint32_t logical) {
  Tb& tb = tbs_[tbi];
  const LaunchState& L = launches_[tb.launch];
  tb.block = logical;
  tb.bx = logical % L.dk->k->grid_x();
  tb.by = logical / L.dk->k->grid_x();
  tb.pc = 0;
  tb.depth = 0;
  tb.round_open = false;
  tb.round_loaded = tb.round_stored = tb.stored_since = 0;
  tb.group = L.dk->k->cais().group_base() + logical;
  tb.state = TbState::kRunning;
  if (ctx_.cfg.block_jitter_frac > 0)
    tb.jitter = std::clamp(
        1.0 + ctx_.cfg.block_jitter_frac * draws_.normal(DriftSource::kBlockJitter, tb.launch, logical), 0.5, 1.5);
  if (tb.role == 0) ++launches_[tb.launch].tbs;
}

std::uint32_t TbScheduler::participants_excluding(const LaunchState& L, std::uint32_t owner) const {
  const auto& c = L.dk->k->cais();
  const std::uint32_t first = c.first_gpu();
  const bool owner_in = owner >= first && owner < first + L.participants;
  return owner_in ? L.participants - 1 : L.participants;
}

void TbScheduler::retire(std::uint32_t tbi) {
  Tb& tb = tbs_[tbi];
  LaunchState& L = launches_[tb.launch];
  if (!L.groups_left.empty() && --L.groups_left[tb.cta] > 0) {  // its CTA's other groups still run
    tb.state = TbState::kFree;
    free_tbs_.push_back(tbi);
    return;
  }
  L.block_done[tb.block] = 1;
  ++L.row_done[tb.by];
  ++L.col_done[tb.bx];
  ++L.done_blocks;
  ++tbs_done_;
  const std::uint32_t next = L.dk->k->dynamic_blocks() ? next_dynamic_block(L, tb.cta) : tb.block + L.ctas;
  if (L.dk->k->persistent() && next < L.total) {
    begin_block(tbi, next);
    if (deps_ready(L, next)) {
      tb.state = TbState::kSyncLaunch;  // not runnable until kTbStart
      ctx_.schedule(ctx_.now() + ctx_.cfg.tb_overhead_ps, kTbStart, tbi);
    } else {
      tb.state = TbState::kWaitDep;
      L.dep_waiters.push_back(tbi);
    }
  } else {
    exit_cta(tbi);
  }
  recheck_dependencies();
  dispatch();
}

// Persistent consumers parked on dependencies re-check; others dispatch in order.
void TbScheduler::recheck_dependencies() {
  for (std::uint32_t li : dispatch_order_) {
    LaunchState& C = launches_[li];
    if (C.dep_waiters.empty()) continue;
    std::vector<std::uint32_t> still;
    for (std::uint32_t t : C.dep_waiters) {
      if (deps_ready(C, tbs_[t].block)) {
        tbs_[t].state = TbState::kSyncLaunch;
        ctx_.schedule(ctx_.now() + ctx_.cfg.tb_overhead_ps, kTbStart, t);
      } else {
        still.push_back(t);
      }
    }
    C.dep_waiters.swap(still);
  }
}

void TbScheduler::launch_done(LaunchState& L) {
  L.done = true;
  L.end_ps = ctx_.now();
  if (L.counted_mma && --mma_running_ == 0) set_clock(ctx_.cfg.clock_ghz_without_mma);
  finish_ps_ = std::max(finish_ps_, ctx_.now());
  --launches_left_;
  for (std::uint32_t s : L.successors)
    if (--launches_[s].pending_preds == 0) release(s);
}

std::size_t TbScheduler::dep_waiting() const {
  std::size_t n = 0;
  for (const auto& L : launches_) n += L.dep_waiters.size();
  return n;
}

void TbScheduler::set_clock(double ghz) {
  if (ghz == ctx_.clock_ghz) return;
  ctx_.clock_ghz = ghz;
  const HopperConfig& c = ctx_.cfg;
  ctx_.mem->set_sm_port_clock(ghz / c.clock_ghz);
}

}  // namespace cais::gpu
