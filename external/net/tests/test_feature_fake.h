// A fake SwitchContext for unit tests of switch features: a tiny event loop in which packets
// arrive at input ports, features see them in order, forwarded and injected packets are
// "delivered" to their dst after a fixed latency, and feature timers fire in time order.
// Injected packets are not offered to features again (as in the NVSwitch router).
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <queue>
#include <string>
#include <tuple>
#include <vector>

#include "cais/net/switch_feature.h"
#include "cais/packet.h"
#include "cais/params.h"

namespace cais::net::testing {

struct Delivered {
  TimePs t = 0;
  Packet p;
};

class FakeSwitch : public SwitchContext {
 public:
  FakeSwitch(std::uint32_t num_gpus, bool functional, std::uint32_t node = 100)
      : num_gpus_(num_gpus), functional_(functional), node_(node), name_("sw" + std::to_string(node)) {}

  // ---- SwitchContext
  TimePs now() const override { return now_; }
  std::uint32_t node_id() const override { return node_; }
  std::uint32_t num_gpus() const override { return num_gpus_; }
  const std::string& name() const override { return name_; }
  PacketHandle new_packet() override {
    const PacketHandle h = pool_.alloc();
    pool_[h].id = ++seq_;
    return h;
  }
  Packet& packet(PacketHandle h) override { return pool_[h]; }
  void release(PacketHandle h) override { pool_.release(h); }
  void inject(PacketHandle h, std::uint32_t in_port, TimePs delay_ps) override {
    ++injected;
    push(now_ + delay_ps + link_ps, kDeliver, h, 0, 0);
  }
  void inject_at_output(PacketHandle h, TimePs delay_ps) override {
    ++injected;
    ++injected_at_outputs;
    push(now_ + delay_ps + link_ps, kDeliver, h, 0, 0);
  }
  void schedule_timer(TimePs t, std::uint32_t feature_index, std::uint64_t arg) override {
    if (t < now_) throw std::logic_error("timer in the past");
    push(t, kTimer, 0, feature_index, arg);
  }
  bool functional() const override { return functional_; }
  bool attached(std::uint32_t dst) const override { return dst < attached_below; }

  // ---- test driving
  void add_feature(SwitchFeature* f) { features_.push_back(f); }
  PacketHandle make(proto::PacketType type, std::uint32_t src, std::uint32_t dst, std::uint64_t addr,
                    std::uint32_t aux = 0, std::uint64_t tag = 0) {
    const PacketHandle h = new_packet();
    Packet& p = pool_[h];
    p.type = type;
    p.src = src;
    p.dst = dst;
    p.addr = addr;
    p.aux = aux;
    p.tag = tag;
    p.flits = 1;
    return h;
  }
  // The packet reaches input port `in_port` (default: its src) at time t.
  void arrive(TimePs t, PacketHandle h, std::int64_t in_port = -1) {
    push(t, kArrive, h, in_port < 0 ? pool_[h].src : static_cast<std::uint32_t>(in_port), 0);
  }
  // Process events with time <= until.
  void run(TimePs until = kNever) {
    while (!q_.empty() && std::get<0>(q_.top()) <= until) {
      const Ev e = q_.top();
      q_.pop();
      now_ = std::get<0>(e);
      const int kind = std::get<2>(e);
      const PacketHandle h = std::get<3>(e);
      if (kind == kArrive) {
        bool consumed = false;
        for (SwitchFeature* f : features_)
          if (f->on_arrival(*this, std::get<4>(e), h) == SwitchFeature::Verdict::kConsumed) {
            consumed = true;
            break;
          }
        if (!consumed) {
          ++forwarded;
          push(now_ + link_ps, kDeliver, h, 0, 0);
        }
      } else if (kind == kTimer) {
        ++timers_fired;
        features_.at(std::get<4>(e))->on_timer(*this, std::get<5>(e));
      } else {
        Delivered d{now_, pool_[h]};
        pool_.release(h);
        if (on_deliver) on_deliver(d);
        delivered.push_back(std::move(d));
      }
    }
    if (until != kNever && until > now_) now_ = until;
  }
  bool quiet() const { return q_.empty(); }
  std::size_t live_packets() const { return pool_.live(); }
  std::vector<Delivered> take() {
    std::vector<Delivered> out;
    out.swap(delivered);
    return out;
  }

  TimePs link_ps = 0;
  std::uint32_t attached_below = 0xffffffffu;  // GPUs >= this are reached through another switch
  std::vector<Delivered> delivered;
  std::function<void(const Delivered&)> on_deliver;
  std::uint64_t injected = 0, injected_at_outputs = 0, forwarded = 0, timers_fired = 0;

 private:
  enum Kind { kArrive = 0, kTimer = 1, kDeliver = 2 };
  // (time, sequence, kind, handle, in_port / feature index, timer arg)
  using Ev = std::tuple<TimePs, std::uint64_t, int, PacketHandle, std::uint32_t, std::uint64_t>;
  void push(TimePs t, int kind, PacketHandle h, std::uint32_t a, std::uint64_t arg) {
    q_.emplace(t, ++evseq_, kind, h, a, arg);
  }
  std::priority_queue<Ev, std::vector<Ev>, std::greater<Ev>> q_;
  PacketPool pool_;
  TimePs now_ = 0;
  std::uint32_t num_gpus_;
  bool functional_;
  std::uint32_t node_;
  std::string name_;
  std::uint64_t seq_ = 0, evseq_ = 0;
  std::vector<SwitchFeature*> features_;
};

// Parameters of every feature at the values of harness/params/features.py, for tests to tweak.
inline Params feature_params() {
  Params p;
  p.set_int("net.flit_bytes", 16);
  p.set_int("net.header_flits", 1);
  p.set_int("net.cais_merge.table_bytes", 40960);
  p.set_int("net.cais_merge.table_entries", 320);
  p.set_bool("net.cais_merge.unlimited", false);
  p.set_double("net.cais_merge.timeout_ns", 5000.0);
  p.set_double("net.cais_merge.lookup_delay_ns", 2.0);
  p.set_bool("net.cais_merge.throttle", false);
  p.set_int("net.cais_merge.throttle_ahead_entries", 64);
  p.set_int("net.cais_merge.throttle_resume_entries", 32);
  p.set_double("net.cais_merge.throttle_hold_ns", 2000.0);
  p.set_bool("net.cais_merge.outstanding_cap", false);
  p.set_double("net.cais_merge.outstanding_cap_kb", 1280.0);
  p.set_double("net.nvls.multicast_delay_ns", 2.0);
  p.set_double("net.nvls.reduce_delay_ns", 4.0);
  p.set_bool("net.nvls.member_acks", false);
  p.set_double("net.group_sync.process_delay_ns", 2.0);
  p.set_int("net.group_sync.table_entries", 4096);
  return p;
}

}  // namespace cais::net::testing
