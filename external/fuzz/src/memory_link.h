// An EngineLink over memory: hands the engine a fixed list of messages, keeps what it sends.
#pragma once
#include <string>
#include <vector>

#include "cais/engine_link.h"

namespace cais::fuzz {

class MemoryLink : public EngineLink {
 public:
  explicit MemoryLink(std::vector<std::vector<std::string>> inbound) : inbound_(std::move(inbound)) {}
  bool recv(std::vector<FrameView>& frames) override;
  void send(const std::string& control, const std::vector<std::string>& batches) override;
  void send_garbage(const std::string& junk) override { sent_.push_back(junk); }
  // Control frames the engine sent, in order.
  const std::vector<std::string>& sent() const { return sent_; }

 private:
  std::vector<std::vector<std::string>> inbound_;
  std::size_t next_ = 0;
  std::vector<std::string> sent_;
};

}  // namespace cais::fuzz
