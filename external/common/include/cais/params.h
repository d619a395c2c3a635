// Strict view of the flat parameter map sent by the harness.
//
// Engines keep no defaults of their own: every value comes from the resolved config. Reading a
// missing key or a key of the wrong type throws ConfigError naming the key; keys under an
// engine's prefixes that nobody read are reported by unread_keys() so they can be rejected.
#pragma once
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "cais/time.h"
#include "cosim.pb.h"

namespace cais {

class Params {
 public:
  Params() = default;
  explicit Params(const google::protobuf::Map<std::string, proto::ParamValue>& m);

  bool has(const std::string& key) const { return values_.count(key) != 0; }
  std::int64_t get_int(const std::string& key) const;
  std::uint64_t get_uint(const std::string& key) const;  // rejects negative values
  double get_double(const std::string& key) const;       // accepts ints too
  double get_positive(const std::string& key) const;     // > 0
  bool get_bool(const std::string& key) const;
  std::string get_string(const std::string& key) const;
  std::string get_enum(const std::string& key, const std::vector<std::string>& allowed) const;
  std::vector<double> get_double_list(const std::string& key) const;
  // A time given in ns, in integer ps: finite, >= min_ps after rounding and at most kMaxTimeNs
  // (a negative or huge value would not fit the unsigned picoseconds).
  TimePs get_time_ps(const std::string& key_ns, TimePs min_ps = 0) const;
  static constexpr double kMaxTimeNs = 1e12;

  void set(const std::string& key, const proto::ParamValue& v) { values_[key] = v; }
  void set_int(const std::string& key, std::int64_t v);
  void set_double(const std::string& key, double v);
  void set_string(const std::string& key, const std::string& v);
  void set_bool(const std::string& key, bool v);

  // Mark every key under `prefix` as read (parameters of a disabled feature, say).
  void ignore_prefix(const std::string& prefix) const;
  // Keys starting with one of `prefixes` that were never read.
  std::vector<std::string> unread_keys(const std::vector<std::string>& prefixes) const;
  // Throws ConfigError for the first unread key under `prefixes`.
  void reject_unread(const std::vector<std::string>& prefixes) const;

 private:
  const proto::ParamValue& lookup(const std::string& key) const;
  std::map<std::string, proto::ParamValue> values_;
  mutable std::set<std::string> read_;
};

}  // namespace cais
