// An EngineLink over memory: hands the engine a fixed list of messages, keeps what it sends.
#pragma once
#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <vector>

#include "cais/engine_link.h"

namespace cais::fuzz {

// With peer batches it is a transport with peer rings (direct_batches): recv_batch(src) hands
// out the batches given for `src` in order, and refuses when none is left.
class MemoryLink : public EngineLink {
 public:
  using Frames = std::vector<std::string>;
  explicit MemoryLink(std::vector<Frames> inbound, std::map<std::uint32_t, std::deque<Frames>> peer_batches = {},
                      bool direct = false)
      : inbound_(std::move(inbound)), peer_(std::move(peer_batches)), direct_(direct) {}
  bool recv(std::vector<FrameView>& frames) override;
  void send(const std::string& control, const std::vector<std::string>& batches) override;
  void send_garbage(const std::string& junk) override { sent_.push_back(junk); }
  bool direct_batches() const override { return direct_; }
  void send_batch(std::uint32_t, const std::vector<FrameView>&) override {}
  const std::vector<FrameView>& recv_batch(std::uint32_t src) override;
  // Control frames the engine sent, in order.
  const std::vector<std::string>& sent() const { return sent_; }

 private:
  std::vector<Frames> inbound_;
  std::size_t next_ = 0;
  std::vector<std::string> sent_;
  std::map<std::uint32_t, std::deque<Frames>> peer_;
  bool direct_;
  Frames current_;
  std::vector<FrameView> current_views_;
};

}  // namespace cais::fuzz
