#include "cais/deferred_credits.h"

namespace cais {

void DeferredCredits::grow() {  // to the next power of two, preserving order
  std::vector<DeferredCredit> bigger(buf_.empty() ? 4 : buf_.size() * 2);
  for (std::size_t i = 0; i < size_; ++i) bigger[i] = at(i);
  buf_.swap(bigger);
  head_ = 0;
}

void DeferredCredits::insert(const DeferredCredit& c) {
  if (size_ == buf_.size()) grow();
  std::size_t i = size_++;
  // Shift later entries up by one (normally none: returns arrive in order).
  while (i > 0 && before(c.at, c.key, at(i - 1).at, at(i - 1).key)) {
    at(i) = at(i - 1);
    --i;
  }
  at(i) = c;
}

std::size_t DeferredCredits::first_from(TimePs t) const {
  std::size_t i = 0;
  while (i < size_ && at(i).at < t) ++i;
  return i;
}

}  // namespace cais
