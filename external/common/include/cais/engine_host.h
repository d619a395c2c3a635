// The engine process: obeys the harness's lock-step protocol over an EngineLink (ZeroMQ or
// shared memory), hosting the GPU and/or switch nodes assigned to it. Engine libraries register node factories; the host
// builds whatever nodes its Configure names.
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cais/component.h"
#include "cais/engine_link.h"
#include "cais/sim.h"
#include "cosim.pb.h"

namespace cais {

struct NodeFactory {
  std::string engine;                      // "gpu" or "net"
  std::vector<std::string> param_prefixes; // keys this engine owns, e.g. {"gpu."}
  // Called once per process before nodes are built (engine-wide setup, e.g. workload parse).
  std::function<void(Sim&)> setup;
  // Builds one node hosted in this process.
  std::function<std::unique_ptr<NodeComponent>(Sim&, std::uint32_t node_id)> build;
};

// Node models by (kind, model name), e.g. (NODE_GPU, "hopper"), (NODE_GPU, "traffic"),
// (NODE_SWITCH, "nvswitch"). The harness picks them with params host.gpu_model and
// host.switch_model. Engine libraries add theirs from a register_*() function called by main.
class NodeRegistry {
 public:
  static NodeRegistry& instance();
  void add(proto::NodeKind kind, const std::string& model, NodeFactory f);
  const NodeFactory* find(proto::NodeKind kind, const std::string& model) const;
  std::vector<std::string> models(proto::NodeKind kind) const;

 private:
  std::map<std::pair<int, std::string>, NodeFactory> factories_;
};

// A whole process's model, usable without ZMQ (standalone mains and unit tests).
class HostedModel {
 public:
  void configure(const proto::Configure& cfg);
  Sim& sim() { return sim_; }
  bool done() const;
  std::string blocked_reason() const;
  void check_drained() const;
  void export_stats(proto::Stats* out);
  const std::vector<std::unique_ptr<NodeComponent>>& nodes() const { return nodes_; }

 private:
  Sim sim_;
  std::vector<std::unique_ptr<NodeComponent>> nodes_;
};

struct FaultInjection {
  std::string kind;   // "", "crash", "hang", "garbage"
  std::uint64_t at_window = 0;
};

// Runs the protocol loop until Shutdown. Returns the process exit code.
int run_engine_host(EngineLink& link, const std::string& name, const FaultInjection& f);

}  // namespace cais
