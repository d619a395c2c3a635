#include "cais/gpu/port_calendar.h"

#include <algorithm>

namespace cais::gpu {

TimePs PortCalendar::reserve(TimePs now, TimePs earliest, std::uint64_t bytes, double bytes_per_ps) {
  bytes_ += bytes;
  earliest = std::max(earliest, now);
  TimePs need = static_cast<TimePs>(static_cast<double>(bytes) / bytes_per_ps + 0.5);
  // Drop what has ended (from the front: the bookings are sorted); the rest are in flight.
  while (head_ < busy_.size() && busy_[head_].second <= now) ++head_;
  if (head_ == busy_.size()) {
    busy_.clear();
    head_ = 0;
  } else if (head_ > 64 && head_ * 2 > busy_.size()) {
    busy_.erase(busy_.begin(), busy_.begin() + static_cast<std::ptrdiff_t>(head_));
    head_ = 0;
  }
  if (need == 0) return earliest;
  // The common case: nothing booked after `earliest`, so the transfer goes at the end.
  if (head_ == busy_.size() || busy_.back().second <= earliest) {
    if (head_ < busy_.size() && busy_.back().second == earliest) busy_.back().second += need;
    else busy_.emplace_back(earliest, earliest + need);
    return earliest + need;
  }
  // Otherwise walk the bookings that end after `earliest`, filling the gaps between them.
  std::size_t k = head_;
  while (busy_[k].second <= earliest) ++k;
  next_.clear();
  const auto add = [this](TimePs s, TimePs e) {
    if (!next_.empty() && next_.back().second >= s) next_.back().second = std::max(next_.back().second, e);
    else next_.emplace_back(s, e);
  };
  TimePs cursor = earliest, done = earliest;
  for (std::size_t i = k; i < busy_.size(); ++i) {
    const auto [s, e] = busy_[i];
    if (need > 0 && s > cursor) {
      const TimePs take = std::min(need, s - cursor);
      add(cursor, cursor + take);
      need -= take;
      done = cursor + take;
    }
    add(s, e);
    cursor = std::max(cursor, e);
  }
  if (need > 0) {
    add(cursor, cursor + need);
    done = cursor + need;
  }
  // The bookings before k end by `earliest`: keep them and splice the rebuilt tail after them.
  busy_.resize(k);
  if (k > head_ && !next_.empty() && busy_.back().second >= next_.front().first) {
    busy_.back().second = std::max(busy_.back().second, next_.front().second);
    busy_.insert(busy_.end(), next_.begin() + 1, next_.end());
  } else {
    busy_.insert(busy_.end(), next_.begin(), next_.end());
  }
  return done;
}

std::size_t PortCalendar::intervals() const { return busy_.size() - head_; }

}  // namespace cais::gpu
