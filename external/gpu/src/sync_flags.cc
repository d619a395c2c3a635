#include "cais/gpu/sync_flags.h"

#include "cais/gpu/block_executor.h"
#include "cais/gpu/nvlink_ports.h"
#include "cais/gpu/tb_scheduler.h"

namespace cais::gpu {

void GroupSync::request(std::uint32_t group, std::uint32_t participants) {
  Sim& sim = ctx_.sim;
  NvlinkPorts& ports = *ctx_.ports;
  const PacketHandle h = sim.new_packet(ctx_.self);
  Packet& p = sim.packets()[h];
  p.type = proto::PKT_SYNC_REQ;
  p.src = p.origin = ctx_.node;
  p.group = group;
  p.aux = participants;
  p.inject_ps = sim.now();
  p.flits = ports.flits(0);
  const std::uint32_t port = ports.plane_for_key(group);
  p.dst = sim.node(ctx_.node).out[port].peer_node;
  ++requests_;
  ports.enqueue(h, port, kReq);
}

void GroupSync::release(std::uint32_t group) {
  auto it = waiters_.find(group);
  if (it == waiters_.end()) return;
  std::vector<std::uint64_t> waiters;
  waiters.swap(it->second);
  waiters_.erase(it);
  const TimePs now = ctx_.now();
  for (std::uint64_t w : waiters) {
    if (w & kBlockWaiter) {  // a registered block may now be dispatched
      const auto launch = static_cast<std::uint32_t>((w >> 32) & 0x7fffffffu);
      const auto cta = static_cast<std::uint32_t>(w & 0xffffffffu);
      wait_ns_.add(static_cast<double>(now - ctx_.sched->launch(launch).reg_ps[cta]) / 1000.0);
      ctx_.sched->prelaunch_released(launch, cta);
      continue;
    }
    const auto t = static_cast<std::uint32_t>(w);
    Tb& tb = ctx_.sched->tb(t);
    wait_ns_.add(static_cast<double>(now - tb.wait_since) / 1000.0);
    ctx_.sched->launch(tb.launch).sync_wait_ps += now - tb.wait_since;  // held its SM meanwhile
    if (tb.state == TbState::kSyncLaunch) {
      ctx_.schedule(now + ctx_.cfg.tb_overhead_ps, kTbStart, t);
    } else if (tb.state == TbState::kWaitSync) {
      ctx_.exec->resume(t);
    }
  }
}

std::size_t GroupSync::waiting() const {
  std::size_t n = 0;
  for (const auto& kv : waiters_) n += kv.second.size();
  return n;
}

void FlagTable::add(std::uint64_t key, std::int64_t v) {
  flags_[key] += v;
  auto it = waiters_.find(key);
  if (it == waiters_.end()) return;
  std::vector<std::uint32_t> waiters;
  waiters.swap(it->second);
  waiters_.erase(it);
  for (std::uint32_t t : waiters) ctx_.exec->resume(t);  // FLAG_WAIT re-checks
}

std::size_t FlagTable::waiting() const {
  std::size_t n = 0;
  for (const auto& kv : waiters_) n += kv.second.size();
  return n;
}

}  // namespace cais::gpu
