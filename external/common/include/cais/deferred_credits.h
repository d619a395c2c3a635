// Credit returns travelling back to a sender without a credit packet ("direct credits").
//
// A credit packet costs a packet, an event and a handler call per hop; when its receiver (the
// sender of the data) is hosted in the same process and asks for it, the returning input
// instead files a DeferredCredit on the receiver's OutputChannel: the (time, ordering key)
// its credit packet's arrival event would have had, the VC and the flits. The channel applies
// it to its counters when the simulation has passed that (time, key), so every read sees the
// counters the credit packets would have produced. The receiver's reaction to a credit (try
// to send, wake VC waiters) is a no-op unless it waits for one; while it waits, it asks the
// channel to "arm" the next return: an event with exactly that (time, key), so it runs where
// the credit packet's arrival would have run. Results are therefore identical to credit
// packets; only the events of credits nobody waited for are gone.
#pragma once
#include <cstdint>
#include <vector>

#include "cais/time.h"

namespace cais {

struct DeferredCredit {
  TimePs at = 0;          // when the credit packet would have arrived
  std::uint64_t key = 0;  // the ordering key its arrival event would have had
  std::uint32_t vc = 0;
  std::uint32_t flits = 0;
  bool armed = false;     // an event at (at, key) wakes the receiver
};

// (at, key) strictly before (t, k), the event queue's order.
inline bool before(TimePs at, std::uint64_t key, TimePs t, std::uint64_t k) {
  return at < t || (at == t && key < k);
}

// FIFO of deferred returns ordered by (at, key): a ring that grows to the number in flight on
// one link (a few) and then never allocates. Returns normally arrive in order; one filed out of
// order (a sender with varying delays) is inserted at its place.
class DeferredCredits {
 public:
  bool empty() const { return size_ == 0; }
  std::size_t size() const { return size_; }
  DeferredCredit& at(std::size_t i) { return buf_[(head_ + i) & (buf_.size() - 1)]; }
  const DeferredCredit& at(std::size_t i) const { return buf_[(head_ + i) & (buf_.size() - 1)]; }
  DeferredCredit& front() { return buf_[head_]; }
  const DeferredCredit& front() const { return buf_[head_]; }
  void push(const DeferredCredit& c) {
    if (size_ < buf_.size() && (size_ == 0 || !before(c.at, c.key, back().at, back().key))) {
      at(size_++) = c;  // in order: the usual case
      return;
    }
    insert(c);
  }
  const DeferredCredit& back() const { return at(size_ - 1); }
  void pop_front() {
    head_ = (head_ + 1) & (buf_.size() - 1);
    --size_;
  }
  // Index of the first entry with at >= t, or size() if none.
  std::size_t first_from(TimePs t) const;

 private:
  void grow();
  void insert(const DeferredCredit& c);
  std::vector<DeferredCredit> buf_;
  std::size_t head_ = 0, size_ = 0;
};

}  // namespace cais
