// What every part of a Hopper GPU shares: the simulator, the component that owns the GPU's
// events (all parts schedule through it, so event keys do not depend on the split), the
// configuration and workload, and the wiring to the other parts (set once by HopperGpu).
//
// The parts, one job each (Garnet-style objects wired together, not one core class):
//   TbScheduler       launches, occupancy, dispatch, TB dependencies   (tb_scheduler.h)
//   BlockExecutor     runs a block's program, one function per opcode family (block_executor.h)
//   LocalMemory       SM ports, L2 tile cache, HBM servers             (local_memory.h)
//   L1Staging         SMs' shared-memory configurations, L1 bound on loads in flight (l1_staging.h)
//   RemotePacketizer  remote ops -> NVLink packets per issue queue    (remote_packetizer.h)
//   NvlinkPorts       output channels, input buffers, egress queues    (nvlink_ports.h)
//   NvlinkHub         answers and applies what peers and switches send (nvlink_hub.h)
//   GroupSync, FlagTable  CAIS group sync and memory flags            (sync_flags.h)
//   FunctionalMemory  values per element, functional workloads only    (functional_memory.h)
//   TileRegisters     the blocks' tile registers, functional only      (tile_registers.h)
//   RedArrivals       counts red.cais contributions landing at the home (red_arrivals.h)
//   RemoteReadCache   remote read-only tiles kept in L2, fetches joined  (remote_read_cache.h)
#pragma once
#include <cstdint>
#include <string>

#include "cais/component.h"
#include "cais/gpu/hopper_config.h"
#include "cais/gpu/workload.h"
#include "cais/sim.h"

namespace cais::gpu {

class TbScheduler;
class BlockExecutor;
class LocalMemory;
class L1Staging;
class RemotePacketizer;
class NvlinkPorts;
class NvlinkHub;
class GroupSync;
class FlagTable;
class FunctionalMemory;
class TileRegisters;
class RedArrivals;
class RemoteReadCache;

// Event kinds of a Hopper GPU (dispatched by HopperGpu::handle to the part that owns them).
enum GpuEvent : std::uint32_t {
  kTbStep = 1, kMemDone, kPortFree, kLaunchReady, kRespond, kTbStart = 7, kDispatch, kThrottleExpiry,
  kLocalDone,   // a local op past the block's 16 tracked completion times
  kCreditWake,  // a direct-credit return the ports wait for (arg32 = port; cais/deferred_credits.h)
  kSmPortFree   // an SM's port has carried the stores its queue sent (arg32 = SM; remote_packetizer.h)
};

// Egress traffic classes of the GPU hub (each has a VC class of its own).
enum TrafficClass : std::uint32_t { kReq = 0, kResp = 1, kPost = 2 };

// Tag bit of flag writes (bit 63 is reserved for switch-generated reads).
inline constexpr std::uint64_t kFlagTag = 1ull << 62;
// Tag bit of posted SM stores (gpu.posted_stores): their flits are reserved at the port until sent.
inline constexpr std::uint64_t kPostedStoreTag = 1ull << 61;

struct GpuContext {
  GpuContext(Sim& s, Component& c, const HopperConfig& k, const Workload& w, std::uint32_t n)
      : sim(s), self(c), cfg(k), wl(w), node(n), rank(n), functional(w.proto().functional()) {}
  Sim& sim;
  Component& self;
  const HopperConfig& cfg;
  const Workload& wl;
  double clock_ghz = 0;  // the SM clock now (cfg.clock_ghz, or clock_ghz_without_mma: TbScheduler)
  std::uint32_t node, rank;
  bool functional;
  bool has_ports = false;

  TbScheduler* sched = nullptr;
  BlockExecutor* exec = nullptr;
  LocalMemory* mem = nullptr;
  L1Staging* l1 = nullptr;
  RemotePacketizer* remote = nullptr;
  NvlinkPorts* ports = nullptr;
  NvlinkHub* hub = nullptr;
  GroupSync* sync = nullptr;
  FlagTable* flags = nullptr;
  FunctionalMemory* fmem = nullptr;
  TileRegisters* regs = nullptr;
  RedArrivals* arrivals = nullptr;
  RemoteReadCache* rcache = nullptr;

  TimePs now() const { return sim.now(); }
  const std::string& name() const { return self.name(); }
  void schedule(TimePs t, std::uint32_t kind, std::uint64_t arg = 0, std::uint32_t arg32 = 0) {
    self.schedule(t, kind, arg, arg32);
  }
};

}  // namespace cais::gpu
