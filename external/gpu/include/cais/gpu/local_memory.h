// Local memory system of a Hopper GPU: one SM <-> L2 port per SM, the L2 (a bandwidth server
// plus a tile cache that keeps the tiles loaded within a kernel up to its capacity, FIFO) and
// HBM. Transaction level: a tile access reserves bytes on the servers and completes after the
// latencies; nothing is simulated per cycle. The SM's port carries a store's data when it is
// issued and a load's data when it returns (port_calendar.h), so a load of B bytes takes its
// latency plus B at the port's load rate; stores cross at the (slower) store rate.
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include "cais/gpu/bandwidth_server.h"
#include "cais/gpu/hbm_load.h"
#include "cais/gpu/hopper_config.h"
#include "cais/gpu/port_calendar.h"
#include "cais/gpu/tile_cache.h"

namespace cais::gpu {

class LocalMemory {
 public:
  explicit LocalMemory(const HopperConfig& cfg);
  // A tile access by an SM; returns its completion time. Writes complete in L2 (their
  // write-back only occupies HBM); read misses go to HBM. A read sets `*first_back` (if given)
  // to when its first bytes are back at the SM.
  TimePs access(TimePs now, std::uint32_t sm, std::uint64_t key, std::uint64_t bytes, bool write,
                TimePs* first_back = nullptr);
  // A round of register loads (a kernel with loads_via_l1) of `loaded` bytes issued at `now` by
  // `warps` warps, whose first bytes are back at `first`, after the group stored `stored` bytes
  // since its previous round: when the round can end. Each warp cycles through a delay (the
  // latency, then its share of the bytes at the warp's own load rate, gpu.warp_load_bytes_per_cycle)
  // and the SM's port (its share of the round's loads and stores at the port's rates), where the
  // warps queue; mean-value analysis of that closed network gives the rounds per time, so the
  // round takes warps / throughput. One warp: the delay plus its port time. Measured on an H100
  // (docs/MEASUREMENTS.md, "A warp's loads", call 42): within 6 % on average of rows of 2-8 warps
  // the parameters were not taken from.
  TimePs warp_round_end(TimePs now, TimePs first, std::uint64_t loaded, std::uint64_t stored,
                        std::uint32_t warps) const;
  // The port's store rate now (bytes per ps; it follows the SM clock).
  double store_rate() const { return store_bytes_per_ps_; }
  // Bytes SM `sm` sends to another GPU: they cross its port at the store rate from `now`;
  // returns when the last has crossed.
  TimePs sm_store(TimePs now, std::uint32_t sm, std::uint64_t bytes) {
    return sm_ports_[sm].reserve(now, now, bytes, store_bytes_per_ps_);
  }
  // A peer's read of `bytes` (NVLink hub): L2 and HBM, plus the L2 latency.
  TimePs remote_read(TimePs now, std::uint64_t bytes);
  // Bytes written by a peer or the copy engine: occupy L2 and HBM.
  void remote_write(TimePs now, std::uint64_t bytes);
  // The SM <-> L2 ports move bytes per SM cycle: their rates follow the SM clock (`scale`: the
  // clock over the configured one).
  void set_sm_port_clock(double scale) {
    load_bytes_per_ps_ = cfg_.sm_load_bytes_per_ps * scale;
    store_bytes_per_ps_ = cfg_.sm_store_bytes_per_ps * scale;
    warp_load_bytes_per_ps_ = cfg_.warp_load_bytes_per_ps * scale;
  }
  // Remote tiles cached in L2 (remote_read_cache.h): resident?, and one that arrived.
  bool l2_resident(std::uint64_t key) const { return l2_tiles_.contains(key); }
  void l2_fill(std::uint64_t key, std::uint64_t bytes) {
    l2_tiles_.lookup_insert(key, static_cast<std::uint32_t>(std::min<std::uint64_t>(bytes, 0xffffffffu)));
  }
  // Tile bytes loaded / stored by blocks (statistics).
  void count_tile(bool write, std::uint64_t bytes) { (write ? st_bytes_ : ld_bytes_) += bytes; }

  const BandwidthServer& l2() const { return l2_; }
  const BandwidthServer& hbm() const { return hbm_; }
  const HbmLoad& hbm_load() const { return hbm_load_; }
  std::uint64_t& ld_bytes() { return ld_bytes_; }
  std::uint64_t& st_bytes() { return st_bytes_; }
  std::uint64_t& hbm_read_bytes() { return hbm_read_bytes_; }
  std::uint64_t& l2_hits() { return l2_hits_; }
  std::uint64_t& l2_misses() { return l2_misses_; }

 private:
  const HopperConfig& cfg_;
  std::vector<PortCalendar> sm_ports_;
  double load_bytes_per_ps_, store_bytes_per_ps_, warp_load_bytes_per_ps_;
  BandwidthServer l2_, hbm_;
  HbmLoad hbm_load_;
  // HBM serves `bytes` from `now` on: the bandwidth server and the loaded-latency average.
  TimePs hbm_reserve(TimePs now, std::uint64_t bytes, bool write) {
    hbm_load_.account(now, bytes, write);
    return hbm_.reserve(now, bytes);
  }
  TileCache l2_tiles_;
  std::uint64_t ld_bytes_ = 0, st_bytes_ = 0, hbm_read_bytes_ = 0, l2_hits_ = 0, l2_misses_ = 0;
};

}  // namespace cais::gpu
