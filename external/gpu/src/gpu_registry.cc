// Registers the Hopper GPU model ("hopper") with the node registry. The workload (a serialized
// cais.isa.Workload in Configure.workload) is decoded once per process and shared by its GPUs.
#include <map>
#include <memory>

#include "cais/engine_host.h"
#include "cais/gpu/hopper_gpu.h"

namespace cais::gpu {
namespace {

std::map<const Sim*, std::shared_ptr<const Workload>>& workloads() {
  static std::map<const Sim*, std::shared_ptr<const Workload>> w;
  return w;
}

const bool registered = [] {
  NodeFactory f;
  f.engine = "gpu";
  f.param_prefixes = {"gpu."};
  f.setup = [](Sim& sim) { workloads()[&sim] = Workload::parse(sim.config().workload(), sim.num_gpus()); };
  f.build = [](Sim& sim, std::uint32_t node) -> std::unique_ptr<NodeComponent> {
    auto it = workloads().find(&sim);
    if (it == workloads().end()) workloads()[&sim] = Workload::parse(sim.config().workload(), sim.num_gpus());
    return std::make_unique<HopperGpu>(sim, node, workloads()[&sim]);
  };
  NodeRegistry::instance().add(proto::NODE_GPU, "hopper", std::move(f));
  return true;
}();

}  // namespace
}  // namespace cais::gpu
