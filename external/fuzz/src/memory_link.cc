#include "memory_link.h"

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

}  // namespace cais::fuzz
