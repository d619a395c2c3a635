// Registers the Hopper GPU model ("hopper") with the node registry. The workload (a serialized
// cais.isa.Workload in Configure.workload) is decoded once per process and shared by its GPUs.
#include <map>
#include <memory>

#include "cais/engine_host.h"
#include "cais/errors.h"
#include "cais/params.h"
#include "cais/gpu/hopper_gpu.h"

namespace cais::gpu {
namespace {

std::map<const Sim*, std::shared_ptr<const Workload>>& workloads() {
  static std::map<const Sim*, std::shared_ptr<const Workload>> w;
  return w;
}

// What the switches must do for the workload's instructions: without the nvls feature a switch
// forwards a multimem request to one GPU as if it were unicast (the run means nothing), and
// without group_sync no switch takes a SYNC_REQ (a routing error deep in the run).
std::shared_ptr<const Workload> decode(Sim& sim) {
  auto wl = Workload::parse(sim.config().workload(), sim.num_gpus());
  const Params& p = sim.params();
  const std::string features = p.has("net.features") ? p.get_string("net.features") : "";
  auto require = [&](bool DecodedKernel::*uses, const std::string& feature, const std::string& what) {
    if (features.find(feature) != std::string::npos) return;
    for (const DecodedKernel& k : wl->kernels())
      if (k.*uses)
        throw ConfigError("net.features", "kernel " + quote(k.k->name()) + " uses " + what +
                                              ", which needs the switch feature " + feature + " (got " +
                                              quote(features) + "; e.g. net.features=" + feature + ")");
  };
  require(&DecodedKernel::uses_multicast, "nvls", "multicast (multimem.*, a multicast DMA)");
  require(&DecodedKernel::uses_group_sync, "group_sync", "CAIS group sync (pre-launch or pre-access)");
  return wl;
}

const bool registered = [] {
  NodeFactory f;
  f.engine = "gpu";
  f.param_prefixes = {"gpu."};
  f.setup = [](Sim& sim) { workloads()[&sim] = decode(sim); };
  f.build = [](Sim& sim, std::uint32_t node) -> std::unique_ptr<NodeComponent> {
    auto it = workloads().find(&sim);
    if (it == workloads().end()) workloads()[&sim] = decode(sim);
    return std::make_unique<HopperGpu>(sim, node, workloads()[&sim]);
  };
  NodeRegistry::instance().add(proto::NODE_GPU, "hopper", std::move(f));
  return true;
}();

}  // namespace
}  // namespace cais::gpu
