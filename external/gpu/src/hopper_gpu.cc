// Hopper GPU: builds and wires the parts, registers statistics, dispatches events.
#include "cais/gpu/hopper_gpu.h"

#include <sstream>

#include "cais/errors.h"
#include "cais/gpu/drift.h"

namespace cais::gpu {

HopperGpu::HopperGpu(Sim& sim, std::uint32_t node, std::shared_ptr<const Workload> wl)
    : NodeComponent(sim, sim.node(node).name, node << 8),
      wl_(std::move(wl)),
      cfg_(drifted_config(sim, sim.node(node).name)),
      ctx_(sim, *this, cfg_, *wl_, node),
      fmem_(*wl_, wl_->proto().functional(), name(), ctx_.rank),
      regs_(ctx_),
      mem_(cfg_),
      l1_(cfg_),
      ports_(ctx_),
      remote_(ctx_),
      hub_(ctx_),
      sync_(ctx_),
      flags_(ctx_),
      arrivals_(ctx_),
      rcache_(ctx_),
      exec_(ctx_),
      sched_(ctx_) {
  ctx_.sched = &sched_;
  ctx_.exec = &exec_;
  ctx_.mem = &mem_;
  ctx_.clock_ghz = cfg_.clock_ghz;  // the rate mem_'s SM ports start at
  ctx_.l1 = &l1_;
  ctx_.remote = &remote_;
  ctx_.ports = &ports_;
  ctx_.hub = &hub_;
  ctx_.sync = &sync_;
  ctx_.flags = &flags_;
  ctx_.fmem = &fmem_;
  ctx_.regs = &regs_;
  ctx_.arrivals = &arrivals_;
  ctx_.rcache = &rcache_;
  ctx_.has_ports = ports_.init();
  sched_.setup();
  sched_.set_clock(cfg_.clock_ghz_without_mma);  // until an mma kernel starts
  register_stats();
}

void HopperGpu::register_stats() {
  auto& st = sim_.stats();
  const std::string n = name();
  st.counter(n + ".tbs_completed", "blocks", &sched_.tbs_done());
  st.counter(n + ".mma_flops", "FLOP", &exec_.mma_flops());
  st.counter(n + ".alu_flops", "FLOP", &exec_.alu_flops());
  st.counter(n + ".local.ld_bytes", "B", &mem_.ld_bytes());
  st.counter(n + ".local.st_bytes", "B", &mem_.st_bytes());
  st.counter(n + ".local.hbm_read_bytes", "B", &mem_.hbm_read_bytes());
  st.counter(n + ".local.l2_tile_hits", "tiles", &mem_.l2_hits());
  st.counter(n + ".local.l2_tile_misses", "tiles", &mem_.l2_misses());
  st.counter(n + ".l1.held_loads", "loads", &l1_.held_loads());
  st.counter(n + ".l1.kept_configs", "blocks", &l1_.kept_configs());
  st.value(n + ".hbm.bytes", "B", [this] { return static_cast<double>(mem_.hbm().bytes); });
  st.value(n + ".l2.bytes", "B", [this] { return static_cast<double>(mem_.l2().bytes); });
  st.counter(n + ".stall.outstanding_limit", "events", &remote_.outstanding_stalls());
  st.counter(n + ".stall.throttled", "events", &remote_.throttle_stalls());
  st.counter(n + ".throttle_bypasses", "turns", &remote_.throttle_bypasses());
  st.counter(n + ".stall.post_credits", "events", &remote_.post_credit_stalls());
  st.value(n + ".bulk_lines", "lines", [this] { return static_cast<double>(remote_.sm_bulk_lines()); });
  st.counter(n + ".stall.sm_port", "events", &remote_.sm_port_stalls());
  st.counter(n + ".throttle_packets", "packets", &remote_.throttles());
  st.counter(n + ".throttle_retagged_fetches", "fetches", &remote_.retagged_fetches());
  if (cfg_.mergeable_cap_lines) {  // net.cais_merge.outstanding_cap
    st.counter(n + ".stall.mergeable_cap", "events", &remote_.cap_stalls());
    st.counter(n + ".mergeable.high_water_lines", "lines", &remote_.mergeable_high_water());
    st.counter(n + ".mergeable.red_ack_lines", "lines", &remote_.red_ack_lines());
  }
  st.counter(n + ".served_requests", "packets", &hub_.served_requests());
  st.counter(n + ".sync_requests", "packets", &sync_.requests());
  st.counter(n + ".red_arrivals.packets", "packets", &arrivals_.packets());
  st.counter(n + ".red_arrivals.contributions", "contributions", &arrivals_.contributions());
  if (cfg_.cache_remote_reads) {  // gpu.cache_remote_reads
    st.counter(n + ".remote_reads.fetches", "tiles", &rcache_.fetches());
    st.counter(n + ".remote_reads.l2_hits", "tiles", &rcache_.hits());
    st.counter(n + ".remote_reads.joined", "tiles", &rcache_.joins());
  }
  st.histogram(n + ".sync_wait", "ns", &sync_.wait_ns());
  st.histogram(n + ".flag_wait", "ns", &exec_.flag_wait_ns());
  st.histogram(n + ".remote_latency", "ns", &remote_.latency_ns());
  st.value(n + ".clock_mhz", "MHz", [this] { return cfg_.clock_ghz * 1000.0; });
  st.value(n + ".finish_time", "ps", [this] { return static_cast<double>(sched_.finish_ps()); });
  if (ctx_.functional) {
    st.value(n + ".ld_value_sum", "value", [this] { return fmem_.ld_value_sum(); });
    // Each buffer's final contents, to compare with numpy without dumping memory.
    for (std::uint32_t b = 0; b < wl_->buffers().size(); ++b) {
      const std::string m = n + ".mem." + wl_->buffers()[b].b->name();
      st.value(m + ".sum", "value", [this, b] { return fmem_.summary(b).sum; });
      st.value(m + ".min", "value", [this, b] { return fmem_.summary(b).min; });
      st.value(m + ".max", "value", [this, b] { return fmem_.summary(b).max; });
      st.value(m + ".hash", "hash", [this, b] { return fmem_.summary(b).hash; });
    }
  }
  if (ctx_.has_ports)
    for (int t = 1; t < 20; ++t) {
      const auto type = static_cast<proto::PacketType>(t);
      if (type == proto::PKT_CREDIT) continue;
      const std::string tn = proto::PacketType_Name(type).substr(4);
      st.counter(n + ".tx." + tn + ".bytes", "B", &ports_.tx_bytes()[t]);
      st.counter(n + ".tx." + tn + ".packets", "packets", &ports_.tx_packets()[t]);
      st.counter(n + ".rx." + tn + ".bytes", "B", &ports_.rx_bytes()[t]);
      st.counter(n + ".rx." + tn + ".packets", "packets", &ports_.rx_packets()[t]);
    }
  for (const auto& L : sched_.launches()) {
    if (!L.mine) continue;
    const std::string k = n + ".kernel" + std::to_string(L.index) + "." + L.dk->k->name();
    const LaunchState* lp = &L;
    st.value(k + ".start", "ns", [lp] { return lp->start_ps == kNever ? -1.0 : lp->start_ps / 1000.0; });
    st.value(k + ".end", "ns", [lp] { return lp->end_ps / 1000.0; });
    st.value(k + ".release", "ns", [lp] { return lp->release_ps / 1000.0; });
    st.value(k + ".first_cta", "ns", [lp] { return lp->first_cta_ps == kNever ? -1.0 : lp->first_cta_ps / 1000.0; });
    st.value(k + ".tbs", "blocks", [lp] { return static_cast<double>(lp->tbs); });
    st.value(k + ".sm_us", "SM-us", [lp] { return lp->sm_share * static_cast<double>(lp->resident_ps) / 1e6; });
    st.value(k + ".sync_wait_sm_us", "SM-us",
             [lp] { return lp->sm_share * static_cast<double>(lp->sync_wait_ps) / 1e6; });
  }
}

void HopperGpu::handle(const Event& e) {
  switch (e.kind) {
    case kPacketArrival: return hub_.on_arrival(static_cast<PacketHandle>(e.arg));
    case kTbStep: return exec_.on_step_event(static_cast<std::uint32_t>(e.arg), e.arg32);
    case kTbStart: return exec_.on_start_event(static_cast<std::uint32_t>(e.arg));
    case kMemDone: return exec_.mem_op_done(static_cast<std::uint32_t>(e.arg));
    case kLocalDone: return exec_.local_overflow_done(static_cast<std::uint32_t>(e.arg));
    case kPortFree: return ports_.pump(e.arg32);
    case kCreditWake: return ports_.on_credit_wake(e.arg32);
    case kSmPortFree: return remote_.sm_port_free(e.arg32);
    case kLaunchReady: return sched_.on_launch_ready(static_cast<std::uint32_t>(e.arg));
    case kDispatch: return sched_.on_dispatch();
    case kThrottleExpiry: return remote_.hold_expired(e.arg);
    case kRespond: return hub_.on_respond(static_cast<PacketHandle>(e.arg));
    default: throw InvariantError(name() + ": unknown event kind");
  }
}

bool HopperGpu::done() const {
  return sched_.all_done() && remote_.live() == 0 && remote_.mergeable_outstanding() == 0;
}

std::string HopperGpu::blocked_reason() const {
  if (done()) return {};
  std::ostringstream os;
  os << sched_.launches_left() << " launches unfinished, " << remote_.live() << " remote ops in flight";
  if (cfg_.mergeable_cap_lines)
    os << ", " << remote_.mergeable_outstanding() << "/" << cfg_.mergeable_cap_lines << " mergeable lines outstanding ("
       << remote_.cap_waiting() << " issue queues stalled on the cap)";
  os << "; blocks waiting: " << sync_.waiting() << " on group sync, " << flags_.waiting() << " on flags, "
     << sched_.dep_waiting() << " on dependencies";
  const std::string room = sched_.blocked_on_room();
  if (!room.empty()) os << "; " << room;
  for (const auto& L : sched_.launches())
    if (L.mine && !L.done) {
      os << "; first unfinished launch " << L.index << " " << quote(L.dk->k->name()) << " (" << L.done_blocks << "/" << L.total
         << " blocks done, " << (L.released ? "released" : "waiting for predecessors") << ")";
      break;
    }
  return os.str();
}

void HopperGpu::check_drained() const {
  if (ctx_.has_ports) ports_.check_drained();
  if (remote_.live() != 0) throw InvariantError(name() + ": remote operations left in flight at end of run");
  if (!rcache_.drained()) throw InvariantError(name() + ": remote tile fetches left in flight at end of run");
  // Acks conserve the lines sent: every mergeable line was answered or acked by a switch.
  if (remote_.mergeable_outstanding() != 0)
    throw InvariantError(name() + ": " + std::to_string(remote_.mergeable_outstanding()) +
                         " mergeable lines never answered or acked (CAIS_RED_ACK) at end of run");
}

std::uint64_t HopperGpu::flag_value(std::uint32_t buffer, std::uint64_t off) const {
  return flags_.value(wl_->buffers()[buffer].base + off);
}

}  // namespace cais::gpu
