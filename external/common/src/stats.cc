#include "cais/stats.h"

#include <cmath>

namespace cais {

// Log-linear buckets: 16 sub-buckets per power of two (about 4% resolution), so quantiles of
// latencies are meaningful without storing samples.
namespace {
constexpr int kSub = 16;
std::size_t bucket_of(double v) {
  if (v < 1.0) return 0;
  int exp = 0;
  const double frac = std::frexp(v, &exp);  // v = frac * 2^exp, frac in [0.5, 1)
  const int sub = static_cast<int>((frac - 0.5) * 2 * kSub);
  return 1 + static_cast<std::size_t>((exp - 1) * kSub + sub);
}
double bucket_upper(std::size_t b) {
  if (b == 0) return 1.0;
  const std::size_t i = b - 1;
  const int exp = static_cast<int>(i / kSub) + 1;
  const int sub = static_cast<int>(i % kSub);
  return std::ldexp(0.5 + (sub + 1) / (2.0 * kSub), exp);
}
}  // namespace

void Histogram::add(double v) {
  if (count_ == 0 || v < min_) min_ = v;
  if (count_ == 0 || v > max_) max_ = v;
  ++count_;
  sum_ += v;
  const std::size_t b = bucket_of(v);
  if (b >= buckets_.size()) buckets_.resize(b + 1, 0);
  ++buckets_[b];
}

double Histogram::quantile(double q) const {
  if (count_ == 0) return 0.0;
  const double target = q * static_cast<double>(count_);
  double seen = 0;
  for (std::size_t b = 0; b < buckets_.size(); ++b) {
    seen += static_cast<double>(buckets_[b]);
    if (seen >= target) return std::max(min_, std::min(bucket_upper(b), max_));
  }
  return max_;
}

void StatsRegistry::counter(const std::string& name, const std::string& unit, const std::uint64_t* v) {
  Entry e;
  e.name = name;
  e.unit = unit;
  e.counter = v;
  entries_.push_back(std::move(e));
}

void StatsRegistry::value(const std::string& name, const std::string& unit, std::function<double()> fn) {
  Entry e;
  e.name = name;
  e.unit = unit;
  e.fn = std::move(fn);
  entries_.push_back(std::move(e));
}

void StatsRegistry::series(const std::string& name, const std::string& unit, const TimeSeries* s) {
  Entry e;
  e.name = name;
  e.unit = unit;
  e.ts = s;
  entries_.push_back(std::move(e));
}

void StatsRegistry::histogram(const std::string& name, const std::string& unit, const Histogram* h) {
  Entry e;
  e.name = name;
  e.unit = unit;
  e.hist = h;
  entries_.push_back(std::move(e));
}

void StatsRegistry::export_to(proto::Stats* out) const {
  auto add = [out](const std::string& name, const std::string& unit, double v) {
    auto* s = out->add_stats();
    s->set_name(name);
    s->set_unit(unit);
    s->set_value(v);
    return s;
  };
  for (const auto& e : entries_) {
    if (e.counter) {
      add(e.name, e.unit, static_cast<double>(*e.counter));
    } else if (e.fn) {
      add(e.name, e.unit, e.fn());
    } else if (e.ts) {
      double total = 0;
      for (double b : e.ts->bins()) total += b;
      auto* s = add(e.name, e.unit, total);
      s->mutable_series()->Add(e.ts->bins().begin(), e.ts->bins().end());
      s->set_series_bin_ps(e.ts->bin_ps());
    } else if (e.hist) {
      add(e.name + ".count", "count", static_cast<double>(e.hist->count()));
      add(e.name + ".mean", e.unit, e.hist->mean());
      add(e.name + ".min", e.unit, e.hist->min());
      add(e.name + ".max", e.unit, e.hist->max());
      add(e.name + ".p50", e.unit, e.hist->quantile(0.5));
      add(e.name + ".p99", e.unit, e.hist->quantile(0.99));
    }
  }
}

}  // namespace cais
