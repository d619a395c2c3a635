#include "cais/gpu/hbm_load.h"

#include <algorithm>
#include <cmath>

#include "cais/gpu/hopper_config.h"

namespace cais::gpu {

namespace {
// Piecewise linear through (xs, ys); flat before the first and after the last point.
double interpolate(const std::vector<double>& xs, const std::vector<double>& ys, double x) {
  if (x <= xs.front()) return ys.front();
  if (x >= xs.back()) return ys.back();
  const auto hi = static_cast<std::size_t>(std::upper_bound(xs.begin(), xs.end(), x) - xs.begin());
  const double f = (x - xs[hi - 1]) / (xs[hi] - xs[hi - 1]);
  return ys[hi - 1] + f * (ys[hi] - ys[hi - 1]);
}
}  // namespace

HbmLoad::HbmLoad(const HopperConfig& cfg)
    : util_(cfg.hbm_load_util), read_ps_(cfg.hbm_load_read_ps), copy_ps_(cfg.hbm_load_copy_ps),
      peak_bytes_per_ps_(cfg.hbm_peak_bytes_per_ps), window_ps_(std::max(1.0, static_cast<double>(cfg.hbm_load_window_ps))) {}

double HbmLoad::decayed(double rate, TimePs now) const {
  return now > last_ ? rate * std::exp(-static_cast<double>(now - last_) / window_ps_) : rate;
}

void HbmLoad::account(TimePs now, std::uint64_t bytes, bool write) {
  if (util_.empty()) return;  // no curve: the idle latency only
  read_rate_ = decayed(read_rate_, now);
  write_rate_ = decayed(write_rate_, now);
  last_ = std::max(last_, now);
  (write ? write_rate_ : read_rate_) += static_cast<double>(bytes) / window_ps_;
}

double HbmLoad::utilisation(TimePs now) const {
  return (decayed(read_rate_, now) + decayed(write_rate_, now)) / peak_bytes_per_ps_;
}

double HbmLoad::write_share() const {
  const double total = read_rate_ + write_rate_;
  return total > 0 ? write_rate_ / total : 0.0;
}

TimePs HbmLoad::extra_latency(TimePs now) const {
  if (util_.empty()) return 0;
  const double u = utilisation(now);
  const double read = interpolate(util_, read_ps_, u);
  const double copy = interpolate(util_, copy_ps_, u);
  // The copy curve was measured at half writes: blend by the write share, capped there.
  const double w = std::min(1.0, write_share() / 0.5);
  return static_cast<TimePs>(read + w * (copy - read) + 0.5);
}

}  // namespace cais::gpu
