// An SM's L1 as the staging buffer of its register loads in flight.
//
// Hopper's L1 and shared memory share one array per SM (gpu.l1_smem_per_sm_kb); the SM's
// shared-memory configuration (gpu.smem_configs_kb) takes its part and the rest is L1, which
// holds the lines of loads into registers (LDG; isa.proto Kernel.loads_via_l1) until they
// return. Measured on an H100 (docs/MEASUREMENTS.md, "One SM's streaming loads"): at the largest
// configuration (28 KB of L1) a CTA with 64 KiB of loads in flight moves 39 % less, and a second
// CTA on the SM adds nothing; with the L1 to spare neither is bound.
//
// The configuration: an SM takes the smallest one that holds its resident blocks' shared memory
// when its first block is placed, and grows it if a later block needs more. Exception, measured
// for cuBLAS's GEMMs (Kernel.holds_carveout): an SM such a kernel freed while it still runs
// keeps that kernel's configuration for the next kernel's blocks that fit it.
//
// The bound (transaction level, no per-line state): a load of B bytes that would complete at
// `done` with the L1 to spare (latency lat = done - now) completes no earlier than lat after
// its last byte can enter the L1, which is when the earlier loads in flight have returned what
// it lacks, plus (B - L1) x lat / L1 if it is larger than the L1 by itself (its own lines cycle
// through). Its bytes count as in flight until it completes.
#pragma once
#include <cstdint>
#include <vector>

#include "cais/gpu/hopper_config.h"
#include "cais/time.h"

namespace cais::gpu {

class L1Staging {
 public:
  static constexpr std::uint32_t kNoLaunch = ~0u;
  explicit L1Staging(const HopperConfig& cfg);

  // SM `sm` takes a block of launch `launch`: `smem` is its resident blocks' shared memory with
  // the new one, `empty` whether it held no block before, `keep` whether the launch that set its
  // configuration holds it (Kernel.holds_carveout) and still runs, `holds` whether `launch`
  // does (then it holds a kept configuration from now on: a cuBLAS GEMM's later parts).
  void take_block(std::uint32_t sm, std::uint32_t launch, std::uint64_t smem, bool empty, bool keep, bool holds);
  // The launch whose block set the SM's configuration (kNoLaunch before any).
  std::uint32_t config_launch(std::uint32_t sm) const { return sms_[sm].launch; }
  std::uint64_t l1_bytes(std::uint32_t sm) const { return cfg_.l1_smem_per_sm - sms_[sm].config; }

  // A register load of `bytes` issued by SM `sm` at `now` that completes at `done` with the L1
  // to spare: when it completes.
  TimePs admit(std::uint32_t sm, TimePs now, std::uint64_t bytes, TimePs done);

  std::uint64_t& held_loads() { return held_loads_; }  // loads the L1 delayed (statistics)
  std::uint64_t& kept_configs() { return kept_; }      // blocks placed in a kept configuration

 private:
  struct InFlight {
    TimePs done;
    std::uint64_t bytes;
  };
  struct Sm {
    std::uint64_t config = 0;
    std::uint32_t launch = kNoLaunch;
    std::vector<InFlight> loads;  // sorted by completion
  };
  std::uint64_t config_for(std::uint64_t smem) const;

  const HopperConfig& cfg_;
  std::vector<Sm> sms_;
  std::uint64_t held_loads_ = 0, kept_ = 0;
};

}  // namespace cais::gpu
