// GPU model "hopper": one H100-class GPU executing tile-ISA programs (proto/isa.proto).
//
// Transaction level and event driven, never a per-cycle loop. The GPU is a set of parts with
// one job each, wired together through a GpuContext (gpu_context.h lists them): thread-block
// scheduler, block executor, local memory, remote-op packetizer, NVLink ports, NVLink hub,
// group sync and flags, functional memory. HopperGpu owns them, is the one component that
// events are scheduled on (so event order does not depend on the split) and hands each event
// to the part that owns it.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "cais/component.h"
#include "cais/gpu/block_executor.h"
#include "cais/gpu/functional_memory.h"
#include "cais/gpu/gpu_context.h"
#include "cais/gpu/hopper_config.h"
#include "cais/gpu/l1_staging.h"
#include "cais/gpu/local_memory.h"
#include "cais/gpu/nvlink_hub.h"
#include "cais/gpu/nvlink_ports.h"
#include "cais/gpu/red_arrivals.h"
#include "cais/gpu/remote_packetizer.h"
#include "cais/gpu/remote_read_cache.h"
#include "cais/gpu/sync_flags.h"
#include "cais/gpu/tb_scheduler.h"
#include "cais/gpu/tile_registers.h"
#include "cais/gpu/workload.h"
#include "cais/sim.h"

namespace cais::gpu {

class HopperGpu : public NodeComponent {
 public:
  HopperGpu(Sim& sim, std::uint32_t node, std::shared_ptr<const Workload> wl);
  void handle(const Event& e) override;
  OutputChannel* direct_credit_channel(std::uint32_t port) override { return ports_.direct_credit_channel(port); }
  bool done() const override;
  std::string blocked_reason() const override;
  void check_drained() const override;

  // For unit tests.
  double mem_value(std::uint32_t buffer, std::uint64_t elem) const { return fmem_.value(buffer, elem); }
  // Initial contents (functional workloads), set before the run starts.
  void set_mem_value(std::uint32_t buffer, std::uint64_t elem, double v) { fmem_.set_value(buffer, elem, v); }
  std::uint64_t flag_value(std::uint32_t buffer, std::uint64_t off) const;
  const LaunchState& launch_state(std::uint32_t i) const { return sched_.launch(i); }

 private:
  void register_stats();

  std::shared_ptr<const Workload> wl_;
  HopperConfig cfg_;
  GpuContext ctx_;
  FunctionalMemory fmem_;
  TileRegisters regs_;
  LocalMemory mem_;
  L1Staging l1_;
  NvlinkPorts ports_;
  RemotePacketizer remote_;
  NvlinkHub hub_;
  GroupSync sync_;
  FlagTable flags_;
  RedArrivals arrivals_;
  RemoteReadCache rcache_;
  BlockExecutor exec_;
  TbScheduler sched_;
};

}  // namespace cais::gpu
