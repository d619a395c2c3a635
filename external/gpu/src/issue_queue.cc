#include "cais/gpu/issue_queue.h"

#include <algorithm>

#include "cais/errors.h"

namespace cais::gpu {

void IssueQueue::set_open_limit(std::size_t k) {
  open_limit_ = std::max<std::size_t>(1, k);
  admit();
}

bool IssueQueue::has_stream(std::uint32_t stream) const {
  for (const Entry& e : active_)
    if (e.stream == stream) return true;
  for (const Entry& e : waiting_)
    if (e.stream == stream) return true;
  return false;
}

void IssueQueue::push(std::uint32_t oi, std::uint32_t stream) {
  if (has_stream(stream)) {
    later_.push_back({oi, stream});
    return;
  }
  waiting_.push_back({oi, stream});
  admit();
}

void IssueQueue::turn_taken(std::size_t k) { cursor_ = (cursor_ + k + 1) % active_.size(); }

void IssueQueue::pop(std::uint32_t oi) {
  const auto it = std::find_if(active_.begin(), active_.end(), [oi](const Entry& e) { return e.op == oi; });
  if (it == active_.end()) throw InvariantError("issue queue: op " + std::to_string(oi) + " is not in the rotation");
  const std::uint32_t stream = it->stream;
  const auto i = static_cast<std::size_t>(it - active_.begin());
  active_.erase(it);
  if (i < cursor_) --cursor_;
  if (cursor_ >= active_.size()) cursor_ = 0;
  const auto next = std::find_if(later_.begin(), later_.end(), [stream](const Entry& e) { return e.stream == stream; });
  if (next != later_.end()) {
    waiting_.push_back(*next);
    later_.erase(next);
  }
  admit();
}

void IssueQueue::admit() {
  while (active_.size() < open_limit_ && !waiting_.empty()) {
    // Inserted just before the cursor: the newcomer is served last in the current round.
    active_.insert(active_.begin() + static_cast<std::ptrdiff_t>(cursor_), waiting_.front());
    waiting_.pop_front();
    cursor_ = (cursor_ + 1) % active_.size();
  }
}

}  // namespace cais::gpu
