#include "cais/params.h"

#include <cmath>
#include <sstream>

#include "cais/errors.h"

namespace cais {

namespace {
const char* kind_name(const proto::ParamValue& v) {
  switch (v.kind_case()) {
    case proto::ParamValue::kI: return "integer";
    case proto::ParamValue::kD: return "number";
    case proto::ParamValue::kS: return "string";
    case proto::ParamValue::kB: return "boolean";
    case proto::ParamValue::kList: return "list";
    default: return "nothing";
  }
}
}  // namespace

Params::Params(const google::protobuf::Map<std::string, proto::ParamValue>& m) {
  for (const auto& kv : m) values_[kv.first] = kv.second;
}

const proto::ParamValue& Params::lookup(const std::string& key) const {
  auto it = values_.find(key);
  if (it == values_.end()) throw ConfigError(key, "missing (the harness must send every parameter)");
  read_.insert(key);
  return it->second;
}

std::int64_t Params::get_int(const std::string& key) const {
  const auto& v = lookup(key);
  if (v.kind_case() == proto::ParamValue::kI) return v.i();
  if (v.kind_case() == proto::ParamValue::kD && std::floor(v.d()) == v.d()) return static_cast<std::int64_t>(v.d());
  throw ConfigError(key, std::string("expected an integer, got ") + kind_name(v));
}

std::uint64_t Params::get_uint(const std::string& key) const {
  const auto i = get_int(key);
  if (i < 0) throw ConfigError(key, "must be >= 0, got " + std::to_string(i));
  return static_cast<std::uint64_t>(i);
}

double Params::get_double(const std::string& key) const {
  const auto& v = lookup(key);
  if (v.kind_case() == proto::ParamValue::kD) return v.d();
  if (v.kind_case() == proto::ParamValue::kI) return static_cast<double>(v.i());
  throw ConfigError(key, std::string("expected a number, got ") + kind_name(v));
}

double Params::get_positive(const std::string& key) const {
  const double d = get_double(key);
  if (!(d > 0)) {
    std::ostringstream os;
    os << "must be > 0, got " << d;
    throw ConfigError(key, os.str());
  }
  return d;
}

bool Params::get_bool(const std::string& key) const {
  const auto& v = lookup(key);
  if (v.kind_case() == proto::ParamValue::kB) return v.b();
  throw ConfigError(key, std::string("expected true/false, got ") + kind_name(v));
}

std::string Params::get_string(const std::string& key) const {
  const auto& v = lookup(key);
  if (v.kind_case() == proto::ParamValue::kS) return v.s();
  throw ConfigError(key, std::string("expected a string, got ") + kind_name(v));
}

std::string Params::get_enum(const std::string& key, const std::vector<std::string>& allowed) const {
  const std::string s = get_string(key);
  for (const auto& a : allowed)
    if (a == s) return s;
  std::string list;
  for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
  throw ConfigError(key, quote(s) + " is not one of: " + list);
}

std::vector<double> Params::get_double_list(const std::string& key) const {
  const auto& v = lookup(key);
  if (v.kind_case() != proto::ParamValue::kList) throw ConfigError(key, std::string("expected a list, got ") + kind_name(v));
  std::vector<double> out;
  for (const auto& item : v.list().items()) {
    if (item.kind_case() == proto::ParamValue::kD) out.push_back(item.d());
    else if (item.kind_case() == proto::ParamValue::kI) out.push_back(static_cast<double>(item.i()));
    else throw ConfigError(key, "list items must be numbers");
  }
  return out;
}

TimePs Params::get_time_ps(const std::string& key_ns, TimePs min_ps) const {
  const double ns = get_double(key_ns);
  if (!(ns >= 0 && ns <= kMaxTimeNs) || ns_to_ps(ns) < min_ps) {
    std::ostringstream os;
    os << "must be a time in ns from " << static_cast<double>(min_ps) / 1000.0 << " to " << kMaxTimeNs << ", got " << ns;
    throw ConfigError(key_ns, os.str());
  }
  return ns_to_ps(ns);
}

void Params::set_int(const std::string& key, std::int64_t v) { values_[key].set_i(v); }
void Params::set_double(const std::string& key, double v) { values_[key].set_d(v); }
void Params::set_string(const std::string& key, const std::string& v) { values_[key].set_s(v); }
void Params::set_bool(const std::string& key, bool v) { values_[key].set_b(v); }

void Params::ignore_prefix(const std::string& prefix) const {
  for (const auto& kv : values_)
    if (kv.first.compare(0, prefix.size(), prefix) == 0) read_.insert(kv.first);
}

std::vector<std::string> Params::unread_keys(const std::vector<std::string>& prefixes) const {
  std::vector<std::string> out;
  for (const auto& kv : values_) {
    if (read_.count(kv.first)) continue;
    for (const auto& p : prefixes)
      if (kv.first.compare(0, p.size(), p) == 0) {
        out.push_back(kv.first);
        break;
      }
  }
  return out;
}

void Params::reject_unread(const std::vector<std::string>& prefixes) const {
  const auto keys = unread_keys(prefixes);
  if (!keys.empty()) throw ConfigError(keys.front(), "unknown parameter (not used by any component)");
}

}  // namespace cais
