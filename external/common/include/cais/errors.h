// Typed exceptions of the engine libraries; only main() turns them into exit codes.
#pragma once
#include <stdexcept>
#include <string>

#include "cais/quote.h"

namespace cais {

// Bad configuration: names the offending key and what is allowed. The key is often the user's
// (a parameter name), so it is escaped; other user strings in `what` go through quote().
class ConfigError : public std::runtime_error {
 public:
  ConfigError(const std::string& key, const std::string& what)
      : std::runtime_error(key.empty() ? what : escaped(key) + ": " + what), key_(escaped(key)) {}
  const std::string& key() const { return key_; }

 private:
  std::string key_;
};

// A broken simulation invariant (bytes lost, buffer overflow, merge entry left behind...).
class InvariantError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

// Malformed message on the co-simulation socket.
class ProtocolError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace cais
