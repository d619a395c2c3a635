// Block executor of a Hopper GPU: runs a resident block's program instruction by instruction
// until one blocks (an mma or alu op on the SM's servers, a blocking memory op, a wait, a flag,
// a group sync), with one function per opcode family. Local memory ops complete at known
// times, kept in the block (no event each); remote ops go to the packetizer and complete
// through mem_op_done.
#pragma once
#include <cstdint>
#include <vector>

#include "cais/gpu/gpu_context.h"
#include "cais/stats.h"
#include "cais/gpu/tb_scheduler.h"

namespace cais::gpu {

class BlockExecutor {
 public:
  explicit BlockExecutor(GpuContext& ctx);

  void on_step_event(std::uint32_t tbi, std::uint32_t seq);  // kTbStep
  void on_start_event(std::uint32_t tbi);                   // kTbStart
  // A remote (or overflow local) memory op of block `tbi` completed (kMemDone, packetizer).
  void mem_op_done(std::uint32_t tbi);
  // A local op that did not fit the block's completion times is done (kLocalDone).
  void local_overflow_done(std::uint32_t tbi);
  // A remote load (its data in the block's registers) is done; after its mem_op_done.
  void remote_load_done(std::uint32_t tbi);
  void wake_at(std::uint32_t tbi, TimePs t);
  void wake(std::uint32_t tbi) { wake_at(tbi, ctx_.now()); }
  // A block parked on a flag or group sync may run again (it re-checks its instruction).
  void resume(std::uint32_t tbi);

  std::uint64_t& mma_flops() { return mma_flops_; }
  std::uint64_t& alu_flops() { return alu_flops_; }
  Histogram& flag_wait_ns() { return flag_wait_ns_; }

 private:
  // Tensor-core and ALU servers of one SM (busy-until times).
  struct SmUnits {
    TimePs tc_busy = 0, alu_busy = 0;
  };
  // An address (or peer) expression evaluated for block `tb`.
  std::int64_t eval(const Tb& tb, const isa::Affine& a) const;
  // The rows and bytes per row a memory instruction moves for this block (edge tiles clipped).
  std::uint32_t rows_of(const Tb& tb, const isa::Instr& ins) const;
  std::uint32_t row_bytes_of(const Tb& tb, const isa::Instr& ins) const;
  void step(std::uint32_t tbi);
  void finish(std::uint32_t tbi);
  // One function per opcode family: true = go on with the next instruction.
  bool exec_control(Tb& tb, const LaunchState& L, const isa::Instr& ins);
  bool exec_compute(std::uint32_t tbi, const isa::Instr& ins);
  bool exec_memory(std::uint32_t tbi, const isa::Instr& ins);
  // Every memory instruction in every run: a contiguous range lies inside `buffer`, a strided
  // tile starts inside it (a GEMM edge tile's mean extent may overhang the matrix's edge); an
  // error names the kernel, pc, block and buffer otherwise. Functional runs check every element.
  void check_extent(const Tb& tb, const LaunchState& L, const isa::Instr& ins, std::uint32_t buffer,
                    const isa::Affine& addr, const char* what) const;
  void exec_local_memory(std::uint32_t tbi, const isa::Instr& ins);
  // Rounds of register loads (kernels with loads_via_l1): a load of `bytes` joins the block's
  // open round (or opens one) and returns when the round can end (LocalMemory::warp_round_end);
  // a store closes the round and counts towards the next one's port time.
  TimePs round_end(Tb& tb, TimePs first, std::uint64_t bytes, std::uint32_t warps);
  static void note_store(Tb& tb, std::uint64_t bytes) {
    tb.round_open = false;
    tb.stored_since += bytes;
  }
  // An SM's own store or reduction to another GPU (its data crosses the SM's port).
  static bool sm_store(isa::Opcode op) {
    return op == isa::ST_REMOTE || op == isa::MM_ST || op == isa::MM_RED || op == isa::RED_CAIS || op == isa::RED_REMOTE;
  }
  bool cached_remote_read(std::uint32_t tbi, const isa::Instr& ins, std::uint32_t peer);
  bool exec_wait(std::uint32_t tbi, const isa::Instr& ins);
  bool exec_flag_wait(std::uint32_t tbi, const isa::Instr& ins);
  bool exec_flag_signal(std::uint32_t tbi, const isa::Instr& ins);
  bool exec_cais_sync(std::uint32_t tbi);
  // Local ops complete at known times: kept in the block, no event each (waits compute them).
  void add_local(std::uint32_t tbi, TimePs done);
  bool mem_satisfied(Tb& tb, std::uint32_t limit);
  void wait_mem(std::uint32_t tbi, std::uint32_t limit);
  // WAIT scope=LOCAL: true when the block's loads (local and remote) and local stores are done;
  // else parks it until they are. Posted remote stores, reductions and multicasts stay in flight.
  bool local_done_or_park(std::uint32_t tbi);

  GpuContext& ctx_;
  std::vector<SmUnits> sms_;
  std::uint64_t mma_flops_ = 0, alu_flops_ = 0;
  Histogram flag_wait_ns_;
};

}  // namespace cais::gpu
