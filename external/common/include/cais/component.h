// Base class of everything that receives events.
#pragma once
#include <cstdint>
#include <string>

#include "cais/event_queue.h"
#include "cais/packet.h"

namespace cais {

class Sim;
class OutputChannel;

// Reserved event kind: a packet (arg = handle) arrives at this node's input port hop_port.
inline constexpr std::uint32_t kPacketArrival = 0xffff0001u;

class Component {
 public:
  // `stable_id` must not depend on the process partition (derive it from node ids).
  Component(Sim& sim, std::string name, std::uint32_t stable_id);
  virtual ~Component() = default;
  Component(const Component&) = delete;
  Component& operator=(const Component&) = delete;

  virtual void handle(const Event& e) = 0;

  const std::string& name() const { return name_; }
  std::uint32_t id() const { return id_; }
  // Partition-independent ordering key for the next event this component creates.
  std::uint64_t next_key() { return (static_cast<std::uint64_t>(id_) << 40) | seq_++; }
  void schedule(TimePs t, std::uint32_t kind, std::uint64_t arg = 0, std::uint32_t arg32 = 0);

 protected:
  Sim& sim_;

 private:
  std::string name_;
  std::uint32_t id_;
  std::uint64_t seq_ = 0;
};

// A network node (GPU or switch) hosted in this process.
class NodeComponent : public Component {
 public:
  using Component::Component;
  // Workload complete (GPUs) / nothing in flight (switches).
  virtual bool done() const = 0;
  // Why the node cannot make progress while idle (empty if nothing is pending).
  virtual std::string blocked_reason() const { return {}; }
  // End-of-run invariants (drained buffers, empty merge tables); throws InvariantError.
  virtual void check_drained() const {}
  // The channel of output `port` if this node takes its credits there without credit packets
  // (cais/deferred_credits.h); null (the default): credit packets.
  virtual OutputChannel* direct_credit_channel(std::uint32_t /*port*/) { return nullptr; }
};

}  // namespace cais
