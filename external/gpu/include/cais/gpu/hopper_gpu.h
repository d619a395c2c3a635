// GPU model "hopper": one H100-class GPU executing tile-ISA programs (proto/isa.proto).
//
// Transaction level and event driven, never a per-cycle loop:
//  - a thread-block scheduler places blocks on SMs under occupancy limits (blocks, threads,
//    registers, shared memory), with concurrent kernels, SM partitions, stream order and
//    priorities, persistent kernels, TB-level dependencies and CAIS pre-launch sync;
//  - a block runs its program instruction by instruction until one blocks (an mma on the SM's
//    tensor-core server, a blocking memory op, a wait, a flag, a sync);
//  - local memory ops are tile transactions on bandwidth servers (SM port, L2, HBM: each a
//    busy-until time) plus a latency; L2 keeps the tiles loaded within a kernel up to its
//    capacity (FIFO), so reuse across blocks hits and first touches go to HBM;
//  - remote ops become NVLink packets: each row of a tile is cut into 32 B sectors, the sectors
//    of one max_packet_bytes line coalesce into one packet; an SM keeps at most
//    max_outstanding_per_sm requests in flight; the plane (port) is PlaneHash(addr);
//  - the NVLink hub answers remote requests after an L2/HBM access (READ_REQ -> READ_RESP,
//    WRITE -> WRITE_ACK, CAIS_LD_REQ -> CAIS_LD_RESP, MM_LD_REDUCE_REQ -> MM_LD_REDUCE_RESP)
//    and applies reductions and multicast stores to memory.
// The member functions live in hopper_gpu.cc (scheduler, execution) and hopper_hub.cc (memory,
// NVLink hub, functional memory).
#pragma once
#include <array>
#include <cstdint>
#include <deque>
#include <memory>
#include <random>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "cais/component.h"
#include "cais/gpu/hopper_config.h"
#include "cais/gpu/tile_cache.h"
#include "cais/gpu/workload.h"
#include "cais/link.h"
#include "cais/routing.h"
#include "cais/sim.h"
#include "cais/stats.h"

namespace cais::gpu {

// A bandwidth server: requests are served in arrival order at a fixed rate.
struct BandwidthServer {
  double bytes_per_ps = 1;
  TimePs busy_until = 0;
  std::uint64_t bytes = 0;
  TimePs reserve(TimePs t, std::uint64_t n) {
    const TimePs start = std::max(t, busy_until);
    busy_until = start + static_cast<TimePs>(static_cast<double>(n) / bytes_per_ps + 0.5);
    bytes += n;
    return busy_until;
  }
};

// Tag bit of flag writes (bit 63 is reserved for switch-generated reads).
inline constexpr std::uint64_t kFlagTag = 1ull << 62;

enum class TbState : std::uint8_t { kFree, kSyncLaunch, kRunning, kWaitMem, kWaitFlag, kWaitSync, kWaitDep };

struct Tb {
  std::uint32_t launch = 0, sm = 0, cta = 0;
  std::uint32_t block = 0, bx = 0, by = 0;  // logical block
  std::uint32_t pc = 0, depth = 0;
  std::array<std::int64_t, 8> loops{};
  std::uint32_t outstanding = 0, wait_limit = 0;  // remote (and overflow) ops in flight
  std::uint32_t seq = 0;                          // wake token: only the latest kTbStep counts
  std::uint8_t nlocal = 0;                        // local ops in flight: completion times below
  bool wait0 = false;                             // a blocking memory op waits for completion
  std::array<TimePs, 16> local{};
  TbState state = TbState::kFree;
  double jitter = 1.0;
  TimePs wait_since = 0;
  std::uint32_t group = 0;
};

struct SmState {
  std::uint32_t blocks = 0, threads = 0, regs = 0;
  std::uint64_t smem = 0;
  TimePs tc_busy = 0, alu_busy = 0;
  BandwidthServer port;
  std::uint32_t outstanding = 0;        // remote requests in flight
  std::deque<std::uint32_t> remote_q;  // RemoteOp indices waiting to issue packets
  bool pump_pending = false;
};

struct LaunchState {
  const isa::Launch* la = nullptr;
  const DecodedKernel* dk = nullptr;
  std::uint32_t index = 0;
  bool mine = false, released = false, done = false, from_host = false;
  std::uint32_t pending_preds = 0;
  std::vector<std::uint32_t> successors;  // launch indices waiting for this one
  std::uint32_t sm_first = 0, sm_count = 0, sm_cursor = 0;
  std::uint32_t blocks_per_sm = 0;
  std::uint32_t total = 0, ctas = 0;        // logical blocks, physical blocks (persistent)
  std::uint32_t next_cta = 0, next_logical = 0, retired_ctas = 0, done_blocks = 0;
  std::vector<std::uint8_t> block_done;
  std::vector<std::uint32_t> dep_waiters;   // persistent TBs waiting for producer blocks
  std::uint32_t participants = 0;           // CAIS group members (incl. this GPU)
  // CAIS pre-launch sync: blocks register their group (SYNC_REQ) up to one residency window
  // ahead of dispatch and are dispatched, in order, once released; pending blocks hold no SM.
  bool prelaunch = false;
  std::uint32_t next_reg = 0;
  std::vector<std::uint8_t> sync_ok;
  std::vector<TimePs> reg_ps;
  TimePs release_ps = 0, start_ps = kNever, end_ps = 0;
  std::uint64_t tbs = 0;
  // Thread-block clusters of >= 4 CTAs: cluster_ctas / 4 slots of gpu.max_clusters_4 each while
  // any of their CTAs is resident (cluster_left: CTAs of each cluster not yet retired).
  std::uint32_t cluster_ctas = 1, cluster_slots = 0;
  std::vector<std::uint32_t> cluster_left;
};

struct RemoteOp {
  std::uint32_t tb = 0, queue = 0;          // queue: SM index, or num_sms for the copy engine
  isa::Opcode op = isa::OP_UNSPECIFIED;
  proto::PacketType type = proto::PKT_UNSPECIFIED;
  std::uint64_t addr = 0, row_stride = 0;   // global address of row 0
  std::uint32_t rows = 0, row_bytes = 0, row = 0, col = 0;
  std::uint32_t peer = 0, aux = 0, group = 0, buffer = 0, elem_bytes = 2;
  std::uint64_t local_off = 0;              // DMA destination offset (heap)
  std::uint32_t pending = 0;                // packets issued, not complete
  bool all_issued = false, in_use = false, flag = false;
  double value = 0;
};

class HopperGpu : public NodeComponent {
 public:
  HopperGpu(Sim& sim, std::uint32_t node, std::shared_ptr<const Workload> wl);
  void handle(const Event& e) override;
  bool done() const override;
  std::string blocked_reason() const override;
  void check_drained() const override;

  // For unit tests.
  double mem_value(std::uint32_t buffer, std::uint64_t elem) const;
  std::uint64_t flag_value(std::uint32_t buffer, std::uint64_t off) const;
  const LaunchState& launch_state(std::uint32_t i) const { return launches_[i]; }

 private:
  enum EventKind : std::uint32_t { kTbStep = 1, kMemDone, kPortFree, kLaunchReady, kRespond, kPumpSm, kTbStart, kDispatch };
  enum TrafficClass : std::uint32_t { kReq = 0, kResp = 1, kPost = 2 };

  // ---- scheduler and execution (hopper_gpu.cc)
  void setup_launches();
  void release(std::uint32_t li);
  void launch_ready(std::uint32_t li);
  void try_dispatch();
  bool deps_ready(const LaunchState& L, std::uint32_t block) const;
  bool fits(const SmState& sm, const LaunchState& L) const;
  void place(LaunchState& L, std::uint32_t sm);
  void begin_block(std::uint32_t tbi, std::uint32_t logical);
  void start_block(std::uint32_t tbi);
  void step(std::uint32_t tbi);
  void finish_block(std::uint32_t tbi);
  void block_retired(LaunchState& L, std::uint32_t block);
  void launch_done(LaunchState& L);
  void mem_op_done(std::uint32_t tbi);
  void wake_at(std::uint32_t tbi, TimePs t) { schedule(t, kTbStep, tbi, ++tbs_[tbi].seq); }
  void wake(std::uint32_t tbi) { wake_at(tbi, sim_.now()); }
  // Local ops complete at known times: kept in the block, no event each (waits compute them).
  void add_local(std::uint32_t tbi, TimePs done);
  bool mem_satisfied(Tb& tb, std::uint32_t limit);
  void wait_mem(std::uint32_t tbi, std::uint32_t limit);
  std::uint32_t participants_excluding(const LaunchState& L, std::uint32_t owner) const;

  // ---- memory, NVLink hub (hopper_hub.cc)
  TimePs local_access(std::uint32_t sm, std::uint64_t key, std::uint64_t bytes, bool write);
  bool l2_lookup_insert(std::uint64_t key, std::uint64_t bytes);
  void issue_remote(std::uint32_t tbi, const isa::Instr& ins, std::uint32_t queue);
  void pump_sm(std::uint32_t q);
  void emit_packet(RemoteOp& op, std::uint32_t op_index);
  void packet_done(std::uint32_t op_index);
  void send_sync(std::uint32_t group, std::uint32_t participants);
  void enqueue(PacketHandle h, std::uint32_t port, std::uint32_t cls);
  void pump_port(std::uint32_t port);
  void on_arrival(PacketHandle h);
  void serve(PacketHandle h);
  void respond(PacketHandle h);
  void apply_store(std::uint64_t addr, const std::vector<double>& values, bool accumulate, std::uint32_t count, double value);
  void read_values(std::uint64_t addr, std::uint32_t bytes, std::vector<double>& out) const;
  std::uint32_t buffer_of(std::uint64_t heap_off) const;
  void fill_local(std::uint32_t buffer, std::uint64_t off, std::uint32_t rows, std::uint32_t row_bytes,
                  std::uint64_t stride, double value, bool accumulate);
  double sum_local(std::uint32_t buffer, std::uint64_t off, std::uint32_t rows, std::uint32_t row_bytes,
                   std::uint64_t stride) const;
  void flag_add(std::uint64_t heap_off, std::int64_t v);

  std::uint32_t node_, rank_;
  std::shared_ptr<const Workload> wl_;
  HopperConfig cfg_;
  bool functional_ = false;
  bool member_acks_ = false;  // NVLS member acks: answer multicast copies with MM_ACK
  std::mt19937_64 rng_;
  std::vector<SmState> sms_;
  std::vector<Tb> tbs_;
  std::vector<std::uint32_t> free_tbs_;
  std::vector<LaunchState> launches_;
  std::vector<std::uint32_t> dispatch_order_;  // launch indices by (priority desc, index)
  std::uint32_t launches_left_ = 0;
  std::uint32_t cluster_slots_used_ = 0;  // of cfg_.max_clusters_4, by resident clusters
  bool dispatch_pending_ = false;
  BandwidthServer l2_, hbm_;
  TileCache l2_tiles_;
  // remote operations
  std::vector<RemoteOp> ops_;
  std::vector<std::uint32_t> free_ops_;
  std::uint32_t ops_live_ = 0;
  std::uint64_t tag_seq_ = 0;
  std::unordered_set<std::uint64_t> throttle_keys_;             // (switch << 32) | group
  std::unordered_map<std::uint32_t, std::uint32_t> throttled_groups_;  // group -> switches
  // NVLink ports
  bool has_ports_ = false;
  std::uint32_t flit_bytes_ = 16, header_flits_ = 1, num_vcs_ = 1;
  std::array<std::uint32_t, 3> vc_of_{};  // VC per traffic class
  PlaneHash planes_;
  std::vector<OutputChannel> out_;
  std::vector<InputBuffer> in_;
  std::vector<std::array<std::deque<PacketHandle>, 3>> port_q_;
  // synchronisation
  // group -> waiters: a block slot (tbi) or a registered, undispatched block (kBlockWaiter bit)
  static constexpr std::uint64_t kBlockWaiter = 1ull << 63;
  std::unordered_map<std::uint32_t, std::vector<std::uint64_t>> sync_waiters_;
  void register_ahead(LaunchState& L);
  void request_dispatch() {
    if (!dispatch_pending_) {
      dispatch_pending_ = true;
      schedule(sim_.now(), kDispatch);
    }
  }
  std::unordered_map<std::uint64_t, std::int64_t> flags_;
  std::unordered_map<std::uint64_t, std::vector<std::uint32_t>> flag_waiters_;
  // functional memory: one vector per buffer (functional workloads only)
  std::vector<std::vector<double>> mem_;
  std::vector<double> scratch_;
  // statistics
  std::uint64_t tbs_done_ = 0, mma_flops_ = 0, alu_flops_ = 0;
  std::uint64_t ld_bytes_ = 0, st_bytes_ = 0, hbm_read_bytes_ = 0, l2_hits_ = 0, l2_misses_ = 0;
  std::uint64_t outstanding_stalls_ = 0, throttle_stalls_ = 0, throttles_ = 0;
  std::uint64_t served_requests_ = 0, sync_reqs_ = 0;
  std::array<std::uint64_t, 20> tx_bytes_{}, tx_packets_{}, rx_bytes_{}, rx_packets_{};
  Histogram sync_wait_ns_, flag_wait_ns_, remote_latency_ns_;
  double ld_value_sum_ = 0;
  TimePs finish_ps_ = 0;
};

}  // namespace cais::gpu
