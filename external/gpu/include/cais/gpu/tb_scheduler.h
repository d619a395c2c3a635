// Thread-block scheduler of a Hopper GPU: launches (stream order, 'after' events, priorities,
// SM partitions, host launch skew), occupancy per SM (blocks, threads, registers, shared
// memory, 4-CTA cluster slots), persistent kernels, TB-level dependencies and CAIS pre-launch
// sync (blocks register their group ahead of dispatch and hold no SM while they wait).
//
// It owns the block slots (Tb) the executor runs; blocks are placed here and retired here.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "cais/gpu/drift.h"
#include "cais/gpu/gpu_context.h"

namespace cais::gpu {

// SMs per texture processing cluster (TPC) on Hopper: the pair a 2-CTA cluster occupies.
inline constexpr std::uint32_t kSmsPerTpc = 2;

enum class TbState : std::uint8_t { kFree, kSyncLaunch, kRunning, kWaitMem, kWaitFlag, kWaitSync, kWaitDep };

// One resident block slot: a CTA of a launch running (or waiting to run) a logical block.
// The dispatch order of a row-interleaved rasterisation (isa.proto Kernel.row_interleave), as
// position -> block: row position rp dispatches row (rp mod groups) x rows-per-group +
// rp / groups, bx fastest; with `blocks`, the groups alternate block by block (group fastest,
// then bx, then the row within the group). A ConfigError names the kernel when groups does not
// divide gy.
std::vector<std::uint32_t> interleaved_rows(std::uint32_t gx, std::uint32_t gy, std::uint32_t groups,
                                           const std::string& kernel, bool blocks = false);

struct Tb {
  std::uint32_t launch = 0, sm = 0, cta = 0;
  std::uint32_t block = 0, bx = 0, by = 0;  // logical block
  std::uint32_t pc = 0, depth = 0;
  std::array<std::int64_t, 8> loops{};
  std::uint32_t outstanding = 0, wait_limit = 0;  // remote (and overflow) ops in flight
  std::uint32_t seq = 0;                          // wake token: only the latest kTbStep counts
  std::uint8_t nlocal = 0;                        // local ops in flight: completion times below
  std::uint32_t local_overflow = 0;               // local ops in flight beyond those 16 (also in outstanding)
  std::uint32_t remote_loads = 0;                 // remote loads in flight (also in outstanding)
  bool wait0 = false;                             // a blocking memory op waits for completion
  std::array<TimePs, 16> local{};
  TbState state = TbState::kFree;
  double jitter = 1.0;
  TimePs wait_since = 0;
  TimePs placed_ps = 0;  // when the block took its SM (its resources are held from then on)
  std::uint32_t group = 0;
  // The launch and CTA whose thread-block cluster this CTA belongs to (itself, or the launch it
  // continues: a continued CTA stays in its cluster's slot until it leaves for good).
  std::uint32_t slot_launch = 0, slot_cta = 0;
  std::uint32_t role = 0;  // the warp group it runs (Kernel.warp_groups; 0 for a plain kernel)
  // Its round of register loads (a kernel with loads_via_l1; LocalMemory::warp_round_end): the
  // loads issued since its last store, from `round_start` (first bytes back at `round_first`),
  // and the bytes it stored after its previous round's loads.
  bool round_open = false;
  TimePs round_start = 0, round_first = 0;
  std::uint64_t round_loaded = 0, round_stored = 0, stored_since = 0;
};

// Resources of one SM held by resident blocks.
struct SmOccupancy {
  std::uint32_t blocks = 0, threads = 0, regs = 0;
  std::uint64_t smem = 0;
};

struct LaunchState {
  const isa::Launch* la = nullptr;
  const DecodedKernel* dk = nullptr;
  std::uint32_t index = 0;
  bool mine = false, released = false, done = false, from_host = false;
  bool counted_mma = false;  // counted in mma_running_ (an mma kernel released on this GPU)
  std::uint32_t pending_preds = 0;
  std::vector<std::uint32_t> successors;  // launch indices waiting for this one
  // Launches whose CTAs continue this one's (Launch.continues): (launch, CTA offset); and
  // whether this launch is such a continuation (it places no CTA itself).
  std::vector<std::pair<std::uint32_t, std::uint32_t>> continuations;
  bool continuation = false;
  // dynamic_blocks: a cluster takes a group of cluster_ctas consecutive blocks at a time (its CTAs
  // work in step, as a cluster's do): the groups each cluster took, and how many each CTA began.
  std::vector<std::vector<std::uint32_t>> dyn_groups;
  std::vector<std::uint32_t> dyn_begun;
  std::uint32_t sm_first = 0, sm_count = 0;
  std::uint32_t blocks_per_sm = 0;
  std::uint32_t total = 0, ctas = 0;        // logical blocks, physical blocks (persistent)
  std::uint32_t next_cta = 0, next_logical = 0, retired_ctas = 0, done_blocks = 0;
  std::vector<std::uint8_t> block_done;
  std::vector<std::uint32_t> row_done, col_done;  // done blocks per row (block_y) / column (block_x)
  std::vector<std::uint32_t> dep_waiters;   // persistent TBs waiting for producer blocks
  std::uint32_t participants = 0;           // CAIS group members (incl. this GPU)
  // CAIS pre-launch sync: blocks register their group (SYNC_REQ) up to one residency window
  // ahead of dispatch and are dispatched, in order, once released; pending blocks hold no SM.
  bool prelaunch = false;
  std::uint32_t next_reg = 0;
  std::vector<std::uint8_t> sync_ok;
  // Dispatch order of the CTAs (gpu.tb_order_window; empty: raster order): position -> CTA.
  std::vector<std::uint32_t> order;
  std::vector<TimePs> reg_ps;
  TimePs release_ps = 0, start_ps = kNever, end_ps = 0;
  TimePs first_cta_ps = kNever;  // when its first CTA took an SM (where CUPTI starts a kernel)
  std::uint64_t tbs = 0;
  // SM time: the share of an SM one block holds (the largest of its threads, registers, shared
  // memory and block-slot shares), the time its blocks held SMs, and the part of it they spent
  // in CAIS pre-access or on-SM pre-launch sync waits.
  double sm_share = 0;
  TimePs resident_ps = 0, sync_wait_ps = 0;
  // Thread-block clusters of >= 4 CTAs: cluster_ctas / 4 slots of gpu.max_clusters_4 each while
  // any of their CTAs is resident (cluster_left: CTAs of each cluster not yet retired).
  std::uint32_t cluster_ctas = 1, cluster_slots = 0;
  std::vector<std::uint32_t> cluster_left;
  // Warp-specialised kernels (Kernel.warp_groups): the groups of each CTA still running.
  std::vector<std::uint8_t> groups_left;
};

class TbScheduler {
 public:
  explicit TbScheduler(GpuContext& ctx);
  // Decode the launches of this GPU and release those without predecessors (needs the ports).
  void setup();

  Tb& tb(std::uint32_t i) { return tbs_[i]; }
  const Tb& tb(std::uint32_t i) const { return tbs_[i]; }
  LaunchState& launch(std::uint32_t i) { return launches_[i]; }
  const LaunchState& launch(std::uint32_t i) const { return launches_[i]; }
  const std::vector<LaunchState>& launches() const { return launches_; }

  void on_launch_ready(std::uint32_t li);
  // The SM clock follows the load: cfg.clock_ghz while a kernel with mma instructions runs,
  // cfg.clock_ghz_without_mma otherwise (equal unless gpu.clock_mhz_without_mma is set). Only
  // later work sees a change: an mma or ALU step, or an SM port transfer, already timed keeps its end.
  void set_clock(double ghz);
  void on_dispatch();
  void request_dispatch();
  // A block ran to its end with its memory ops done: free its slot or run the next logical
  // block of a persistent kernel, then re-check dependencies and dispatch.
  void retire(std::uint32_t tbi);
  // Group sync released a block registered ahead of dispatch (pre-launch sync).
  void prelaunch_released(std::uint32_t launch, std::uint32_t cta);
  // Group members of launch L's kernel other than `owner` (aux of CAIS requests).
  std::uint32_t participants_excluding(const LaunchState& L, std::uint32_t owner) const;

  bool all_done() const { return launches_left_ == 0; }
  std::uint32_t launches_left() const { return launches_left_; }
  std::size_t dep_waiting() const;
  // For a deadlock report: the first released launch whose next block is held back only by
  // room (no SM of its partition fits it), or "" if none is.
  std::string blocked_on_room() const;
  std::uint64_t& tbs_done() { return tbs_done_; }
  TimePs finish_ps() const { return finish_ps_; }

 private:
  void release(std::uint32_t li);
  void setup_continuation(LaunchState& C);
  void dispatch();
  bool deps_ready(const LaunchState& L, std::uint32_t block) const;
  bool fits(const SmOccupancy& sm, const LaunchState& L) const;
  std::uint32_t tpc_blocks(std::uint32_t sm) const;
  std::uint32_t pick_sm(const LaunchState& L) const;
  std::uint32_t pick_tpc(const LaunchState& L) const;
  void place(LaunchState& L, std::uint32_t sm);
  std::uint32_t occupy(LaunchState& L, std::uint32_t sm, std::uint32_t cta);
  std::uint32_t new_tb();
  void start_warp_groups(std::uint32_t tbi);
  void start_cta(std::uint32_t tbi);
  void exit_cta(std::uint32_t tbi);
  std::uint32_t next_dynamic_block(LaunchState& L, std::uint32_t cta);
  void begin_block(std::uint32_t tbi, std::uint32_t logical);
  void register_ahead(LaunchState& L);
  void recheck_dependencies();
  void launch_done(LaunchState& L);

  GpuContext& ctx_;
  std::uint32_t cta_at(const LaunchState& L, std::uint32_t pos) const { return L.order.empty() ? pos : L.order[pos]; }

  DriftDraws draws_;
  std::vector<SmOccupancy> sms_;
  std::vector<Tb> tbs_;
  std::vector<std::uint32_t> free_tbs_;
  std::vector<LaunchState> launches_;
  std::vector<std::uint32_t> dispatch_order_;  // launch indices by (priority desc, index)
  std::uint32_t launches_left_ = 0;
  std::uint32_t mma_running_ = 0;  // released, unfinished launches with mma instructions
  std::uint32_t cluster_slots_used_ = 0;  // of cfg.max_clusters_4, by resident clusters
  bool dispatch_pending_ = false;
  std::uint64_t tbs_done_ = 0;
  TimePs finish_ps_ = 0;
};

}  // namespace cais::gpu
