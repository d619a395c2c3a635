// One process's simulation context: event queue, packet pool, topology view, outbox.
//
// Packets to a node hosted here become arrival events directly; packets to a node hosted by
// another process go to that process's outbound batch and are inserted there, with the same
// (time, key), at the start of the next window. Because a packet's arrival is always at least
// one cross-process link latency after it was sent, and the window is no longer than that,
// the receiver never sees it late: partitioning changes nothing.
#pragma once
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "cais/component.h"
#include "cais/event_queue.h"
#include "cais/packet.h"
#include "cais/params.h"
#include "cais/stats.h"
#include "cosim.pb.h"

namespace cais {

struct PortLink {
  bool connected = false;
  std::uint32_t peer_node = 0;
  std::uint32_t peer_port = 0;
  double bw_gbps = 0;
  TimePs latency_ps = 0;
  std::uint32_t lanes = 0;
};

struct NodeInfo {
  std::uint32_t id = 0;
  proto::NodeKind kind = proto::NODE_KIND_UNSPECIFIED;
  std::string name;
  std::vector<PortLink> out;  // indexed by local port
};

// Limits of a topology link (Sim::configure refuses others).
inline constexpr double kMinLinkGbps = 1e-3;
inline constexpr double kMaxLinkGbps = 1e6;
inline constexpr TimePs kMaxLinkLatencyPs = 1000000000000ull;  // 1 s

class Sim {
 public:
  Sim();
  void configure(const proto::Configure& cfg);  // topology, partition, params, seed

  // ---- time and events
  TimePs now() const { return now_; }
  // Ordering key of the event being handled.
  std::uint64_t current_key() const { return cur_key_; }
  // Where the simulation stands: every event at (now(), k) with k < passed_key() has run, or
  // would have had it been queued. It can exceed current_key(): an event scheduled for now
  // with a smaller key runs after the queued ones with larger keys that popped before it.
  std::uint64_t passed_key() const { return passed_key_; }
  void push(const Event& e) {
#ifndef NDEBUG
    check_not_past(e);
#endif
    queue_.push(e);
  }
  // Process every event with time < until, or the first max_events of them: the queue is the
  // whole state, so stopping between any two events and calling again continues exactly.
  // Returns number of events processed.
  std::uint64_t run_until(TimePs until, std::uint64_t max_events = UINT64_MAX);
  TimePs next_event_time() const { return queue_.next_time(); }
  // Global end of the run, the same in every process (set before statistics are exported);
  // rates and utilisations divide by this, never by the process-local now().
  TimePs end_time() const { return end_time_; }
  void set_end_time(TimePs t) { end_time_ = t; }
  std::uint64_t events_processed() const { return events_; }

  // ---- packets
  PacketPool& packets() { return pool_; }
  PacketHandle new_packet(Component& creator);  // assigns a unique id
  // Send `h` to (p.hop_dst, p.hop_port) arriving at `arrival`. Takes ownership.
  void send(PacketHandle h, TimePs arrival, Component& sender);
  // The `count` packet records of a batch from another process (each already carries
  // arrival_ps and hop_key); throws ProtocolError on a malformed batch, having taken nothing.
  void deliver_inbound(std::string_view records, std::uint32_t count);

  // Direct credits (cais/deferred_credits.h) where both ends take part (the default), or credit
  // packets everywhere: results are identical; tests compare the two.
  void set_credit_packets_only(bool v) { credit_packets_only_ = v; }
  bool credit_packets_only() const { return credit_packets_only_; }

  // ---- topology / partition
  const NodeInfo& node(std::uint32_t id) const { return nodes_.at(id); }
  std::size_t num_nodes() const { return nodes_.size(); }
  std::uint32_t num_gpus() const { return num_gpus_; }
  bool is_local(std::uint32_t node) const { return node_engine_[node] == engine_index_; }
  void attach_node(std::uint32_t node_id, NodeComponent* c);
  NodeComponent* local_node(std::uint32_t id) const { return local_nodes_[id]; }
  const std::vector<std::uint32_t>& hosted_nodes() const { return hosted_; }

  // ---- configuration, randomness, statistics
  Params& params() { return params_; }
  const Params& params() const { return params_; }
  const proto::Configure& config() const { return cfg_; }
  std::uint64_t seed() const { return cfg_.seed(); }
  // A generator seeded from (global seed, stream name): independent of the partition.
  std::mt19937_64 make_rng(const std::string& stream) const;
  StatsRegistry& stats() { return stats_; }
  bool watched(const std::string& component) const;
  void trace(const Component& c, const std::string& msg) const;

  // ---- process boundary
  // Packets for one other process since the last take, as records (cais/packet_records.h).
  struct Outbound {
    std::string records;
    std::uint32_t packets = 0;
    TimePs min_arrival = kNever;
  };
  // Outbound batches produced since the last take; index = destination engine.
  std::vector<Outbound>& outbox() { return outbox_; }
  std::size_t outbox_packets() const { return outbox_count_; }
  void clear_outbox();
  std::uint32_t engine_index() const { return engine_index_; }
  std::uint32_t num_engines() const { return num_engines_; }
  TimePs window_start() const { return window_start_; }
  void set_window_start(TimePs t) { window_start_ = t; }

 private:
  void check_not_past(const Event& e) const;
  void check_inbound(const Packet& pkt) const;
  proto::Configure cfg_;
  Params params_;
  EventQueue queue_;
  PacketPool pool_;
  StatsRegistry stats_;
  TimePs now_ = 0;
  std::uint64_t cur_key_ = 0;
  std::uint64_t passed_key_ = 0;
  bool credit_packets_only_ = false;
  TimePs window_start_ = 0;
  TimePs end_time_ = 0;
  std::uint64_t events_ = 0;
  std::uint64_t next_packet_seq_ = 0;
  std::vector<NodeInfo> nodes_;
  std::vector<std::uint32_t> node_engine_;
  std::vector<NodeComponent*> local_nodes_;
  std::vector<std::uint32_t> hosted_;
  std::uint32_t engine_index_ = 0;
  std::uint32_t num_engines_ = 1;
  std::uint32_t num_gpus_ = 0;
  std::vector<Outbound> outbox_;
  std::vector<PacketHandle> inbound_;  // a batch's packets, queued once the whole batch is valid
  std::size_t outbox_count_ = 0;
  std::vector<std::string> watch_;
};

}  // namespace cais
