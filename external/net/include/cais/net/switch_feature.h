// Pluggable in-switch processing (NVLS, the CAIS merge unit, group sync, ...).
//
// The router offers every packet that arrives at an input port to its features, in
// registration order, before routing. A feature either lets the packet continue (kForward),
// or takes it (kConsumed: the feature now owns the handle and must forward, answer, merge or
// release it). Features create packets of their own (responses, multicast copies, merged
// writes, releases) through SwitchContext::inject_at_output, which queues them at the output
// toward their dst (as a switch that replicates in its crossbar sends each copy: no input
// port's crossbar slot, which carries that port's own traffic); SwitchContext::inject routes a
// packet from an input port as if it had arrived there, for what a feature passes on (a
// forwarded request, a fetched line going on to its requester). Injected packets are routed
// directly and are not offered to the features again. New features register by name and are
// enabled from config (net.features), so adding one touches no router code.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cais/packet.h"
#include "cais/stats.h"
#include "cais/time.h"

namespace cais {
class Params;
}

namespace cais::net {

class SwitchContext {
 public:
  virtual ~SwitchContext() = default;
  virtual TimePs now() const = 0;
  virtual std::uint32_t node_id() const = 0;
  virtual std::uint32_t num_gpus() const = 0;
  virtual const std::string& name() const = 0;
  virtual PacketHandle new_packet() = 0;
  virtual Packet& packet(PacketHandle h) = 0;
  virtual void release(PacketHandle h) = 0;
  // A control packet (ack, throttle) of switch node `src` for `dst`: no payload, `flits` on the
  // wire, injected now unless the caller stamps another time.
  PacketHandle new_control_packet(proto::PacketType type, std::uint32_t src, std::uint32_t dst, std::uint32_t flits) {
    const PacketHandle h = new_packet();
    Packet& q = packet(h);
    q.type = type;
    q.src = q.origin = src;
    q.dst = dst;
    q.inject_ps = now();
    q.payload_bytes = 0;
    q.flits = flits;
    return h;
  }
  // Route `h` (its dst must be set) from `in_port` after `delay_ps` of processing.
  virtual void inject(PacketHandle h, std::uint32_t in_port, TimePs delay_ps) = 0;
  // Queue `h` (its dst must be set) at the output port toward its dst after `delay_ps`: it
  // takes no input port's crossbar time and waits only for that output and its credits (how
  // a switch that replicates in its crossbar sends each copy of a multicast).
  virtual void inject_at_output(PacketHandle h, TimePs delay_ps) = 0;
  // Call feature `feature_index`'s on_timer(arg) at absolute time t.
  virtual void schedule_timer(TimePs t, std::uint32_t feature_index, std::uint64_t arg) = 0;
  virtual bool functional() const = 0;  // packets carry values
  // Routing facts a feature may need (the CAIS merge unit merges only where every request for
  // an address converges: the switch the owner/home GPU is attached to). Defaults describe a
  // single-level fabric (DGX style: switch port g leads to GPU g); a router of multi-level
  // fabrics overrides them.
  // The output port a packet to GPU `dst` leaves by.
  virtual std::uint32_t port_toward(std::uint32_t dst) const { return dst; }
  // Whether GPU `dst` is attached to this switch (this switch is the packet's last hop).
  virtual bool attached(std::uint32_t /*dst*/) const { return true; }
};

class SwitchFeature {
 public:
  enum class Verdict { kForward, kConsumed };
  virtual ~SwitchFeature() = default;
  virtual Verdict on_arrival(SwitchContext& ctx, std::uint32_t in_port, PacketHandle h) = 0;
  virtual void on_timer(SwitchContext& /*ctx*/, std::uint64_t /*arg*/) {}
  virtual void register_stats(StatsRegistry& /*reg*/, const std::string& /*prefix*/) const {}
  // Nothing may be left behind at the end of a run (throws InvariantError).
  virtual void check_drained() const {}
  virtual bool idle() const { return true; }
};

struct FeatureArgs {
  const Params* params;        // the engine's params (keys net.<feature>.*)
  std::uint32_t num_ports;
  std::uint32_t feature_index; // for schedule_timer
  std::uint32_t switch_node;
};

// name -> factory; features add themselves with FeatureRegistry::instance().add(name, factory)
// from a static registrar in their own .cc; their parameters are the keys net.<name>.*.
class FeatureRegistry {
 public:
  using Factory = std::function<std::unique_ptr<SwitchFeature>(const FeatureArgs&)>;
  static FeatureRegistry& instance();
  void add(const std::string& name, Factory f);
  std::unique_ptr<SwitchFeature> make(const std::string& name, const FeatureArgs& a) const;
  std::vector<std::string> names() const;

 private:
  std::map<std::string, Factory> factories_;
};

}  // namespace cais::net
