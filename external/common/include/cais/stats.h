// Hierarchical, typed statistics returned as data (proto Stats), never scraped from stdout.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "cais/errors.h"
#include "cais/time.h"
#include "cosim.pb.h"

namespace cais {

// Counts values into fixed-width bins over simulated time (e.g. link bytes per microsecond).
class TimeSeries {
 public:
  static constexpr std::size_t kMaxBins = std::size_t{1} << 26;
  explicit TimeSeries(TimePs bin_ps = 1000000) : bin_ps_(bin_ps) {}
  void add(TimePs t, double v) {
    const std::size_t bin = static_cast<std::size_t>(t / bin_ps_);
    if (bin >= bins_.size()) {
      if (bin >= kMaxBins)  // 512 MB of bins: a run far longer than its statistics' bins
        throw InvariantError("a time series of " + std::to_string(bin_ps_) + " ps bins reached " + std::to_string(t) +
                             " ps, past " + std::to_string(kMaxBins) + " bins");
      bins_.resize(bin + 1, 0.0);
    }
    bins_[bin] += v;
  }
  TimePs bin_ps() const { return bin_ps_; }
  const std::vector<double>& bins() const { return bins_; }

 private:
  TimePs bin_ps_;
  std::vector<double> bins_;
};

// Streaming histogram with power-of-two buckets plus exact count/sum/min/max.
class Histogram {
 public:
  void add(double v);
  std::uint64_t count() const { return count_; }
  double mean() const { return count_ ? sum_ / static_cast<double>(count_) : 0.0; }
  double min() const { return count_ ? min_ : 0.0; }
  double max() const { return count_ ? max_ : 0.0; }
  double quantile(double q) const;  // approximate, from buckets

 private:
  std::uint64_t count_ = 0;
  double sum_ = 0, min_ = 0, max_ = 0;
  std::vector<std::uint64_t> buckets_;  // log-linear, see stats.cc
};

class StatsRegistry {
 public:
  void counter(const std::string& name, const std::string& unit, const std::uint64_t* v);
  void value(const std::string& name, const std::string& unit, std::function<double()> fn);
  void series(const std::string& name, const std::string& unit, const TimeSeries* s);
  void histogram(const std::string& name, const std::string& unit, const Histogram* h);
  void export_to(proto::Stats* out) const;

 private:
  struct Entry {
    std::string name, unit;
    const std::uint64_t* counter = nullptr;
    std::function<double()> fn;
    const TimeSeries* ts = nullptr;
    const Histogram* hist = nullptr;
  };
  std::vector<Entry> entries_;
};

}  // namespace cais
