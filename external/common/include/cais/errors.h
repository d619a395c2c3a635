// Typed exceptions of the engine libraries; only main() turns them into exit codes.
#pragma once
#include <stdexcept>
#include <string>

namespace cais {

// Bad configuration: names the offending key and what is allowed.
class ConfigError : public std::runtime_error {
 public:
  ConfigError(std::string key, const std::string& what)
      : std::runtime_error(key.empty() ? what : key + ": " + what), key_(std::move(key)) {}
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
