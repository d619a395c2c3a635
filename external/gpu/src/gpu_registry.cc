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

// Multicast instructions need switches that replicate them: without the nvls feature a switch
// forwards a multimem request to one GPU as if it were unicast, and the run means nothing.
std::shared_ptr<const Workload> decode(Sim& sim) {
  auto wl = Workload::parse(sim.config().workload(), sim.num_gpus());
  const Params& p = sim.params();
  const std::string features = p.has("net.features") ? p.get_string("net.features") : "";
  if (features.find("nvls") == std::string::npos)
    for (const DecodedKernel& k : wl->kernels())
      if (k.uses_multicast)
        throw ConfigError("net.features", "kernel " + quote(k.k->name()) + " uses multicast (multimem.*, a multicast "
                                          "DMA), which needs the switch feature nvls (got " + quote(features) +
                                          "; e.g. net.features=nvls)");
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
