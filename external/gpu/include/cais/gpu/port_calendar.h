// An SM's port to L2 as a calendar of the times it carries data.
//
// One port carries a store's data when the SM issues it and a load's data when it comes back
// from L2 or HBM, a latency later, each at its own direction's rate (the caller's): the two
// directions are one resource on an H100, in which a stored byte takes 3.6 times a loaded
// one's time (docs/MEASUREMENTS.md, "One SM's port by direction"), so every booking takes the
// same free time whatever its direction. Reservations are not made in time order: a load
// issued now books the port for when its data returns, and a store issued a moment later may
// still cross before it. A first-come server (bandwidth_server.h) would put that store behind
// the load's future return, or, booking the load at its issue as the engine once did, overlap
// the load's transfer with its own latency (measured against that: docs/VALIDATION.md, "One
// SM's port"). A transfer here takes the port's free time from its earliest start on, in
// whatever gaps earlier bookings left (the lines of loads in flight interleave), and completes
// when its last byte has crossed. Busy intervals that ended before `now` are dropped, so the
// calendar holds only the transfers in flight; a booking after all others is appended at once.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include "cais/time.h"

namespace cais::gpu {

class PortCalendar {
 public:
  // Books `bytes` at `bytes_per_ps` from `earliest` (>= now) on, at `now` (no booking is ever
  // made for earlier than a now already seen); returns when the last byte has crossed.
  TimePs reserve(TimePs now, TimePs earliest, std::uint64_t bytes, double bytes_per_ps);
  std::uint64_t bytes() const { return bytes_; }
  std::size_t intervals() const;  // bookings in flight (tests: they merge, ended ones go)

 private:
  std::vector<std::pair<TimePs, TimePs>> busy_, next_;  // disjoint [start, end), sorted, merged
  std::size_t head_ = 0;                                 // busy_[0, head_) have ended
  std::uint64_t bytes_ = 0;
};

}  // namespace cais::gpu
