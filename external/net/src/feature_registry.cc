#include <stdexcept>

#include "cais/errors.h"
#include "cais/net/switch_feature.h"

namespace cais::net {

FeatureRegistry& FeatureRegistry::instance() {
  static FeatureRegistry r;
  return r;
}

void FeatureRegistry::add(const std::string& name, Factory f) { factories_[name] = std::move(f); }

std::unique_ptr<SwitchFeature> FeatureRegistry::make(const std::string& name, const FeatureArgs& a) const {
  auto it = factories_.find(name);
  if (it == factories_.end()) {
    std::string list;
    for (const auto& kv : factories_) list += (list.empty() ? "" : ", ") + kv.first;
    throw ConfigError("net.features", "unknown switch feature " + quote(name) + " (known: " + list + ")");
  }
  return it->second(a);
}

std::vector<std::string> FeatureRegistry::names() const {
  std::vector<std::string> out;
  for (const auto& kv : factories_) out.push_back(kv.first);
  return out;
}

}  // namespace cais::net
