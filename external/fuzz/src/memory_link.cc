#include "memory_link.h"

#include "cais/errors.h"

namespace cais::fuzz {

bool MemoryLink::recv(std::vector<FrameView>& frames) {
  if (next_ >= inbound_.size()) return false;  // as a harness that went away
  frames.clear();
  for (const auto& f : inbound_[next_]) frames.push_back(FrameView{f.data(), f.size()});
  ++next_;
  return true;
}

void MemoryLink::send(const std::string& control, const std::vector<std::string>& batches) {
  sent_.push_back(control);
}

const std::vector<FrameView>& MemoryLink::recv_batch(std::uint32_t src) {
  if (!direct_) return EngineLink::recv_batch(src);
  auto it = peer_.find(src);
  if (it == peer_.end() || it->second.empty())
    throw ProtocolError("no packet batch from engine " + std::to_string(src));  // a real ring would wait
  current_ = std::move(it->second.front());
  it->second.pop_front();
  current_views_.clear();
  for (const auto& f : current_) current_views_.push_back(FrameView{f.data(), f.size()});
  return current_views_;
}

}  // namespace cais::fuzz
