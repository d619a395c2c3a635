// Flat event queue ordered by (time, key).
//
// The key makes ordering total and independent of how nodes are split over processes: it is
// (stable component id << 40) | per-component sequence, assigned by whoever schedules the
// event. Two runs that differ only in partitioning therefore pop events in the same order.
#pragma once
#include <cstdint>
#include <vector>

#include "cais/time.h"

namespace cais {

class Component;

struct Event {
  TimePs time;
  std::uint64_t key;
  Component* target;
  std::uint32_t kind;   // meaning defined by the target component
  std::uint32_t arg32;
  std::uint64_t arg;    // usually a packet handle or an index
};

// Implicit 4-ary min-heap on a vector: no per-event allocation, cache-friendly sift.
class EventQueue {
 public:
  bool empty() const { return heap_.empty(); }
  std::size_t size() const { return heap_.size(); }
  TimePs next_time() const { return heap_.empty() ? kNever : heap_.front().time; }
  const Event& top() const { return heap_.front(); }

  void push(const Event& e) {
    heap_.push_back(e);
    sift_up(heap_.size() - 1);
  }

  Event pop() {
    Event top = heap_.front();
    const Event last = heap_.back();
    heap_.pop_back();
    if (!heap_.empty()) sift_last_down(last);
    return top;
  }

  void reserve(std::size_t n) { heap_.reserve(n); }

 private:
  // (time, key) as one 128-bit number: a branch-free total order.
  static unsigned __int128 order(const Event& e) {
    return (static_cast<unsigned __int128>(e.time) << 64) | e.key;
  }
  static bool before(const Event& a, const Event& b) { return order(a) < order(b); }
  void sift_up(std::size_t i) {
    const Event e = heap_[i];
    while (i > 0) {
      const std::size_t parent = (i - 1) / 4;
      if (!before(e, heap_[parent])) break;
      heap_[i] = heap_[parent];
      i = parent;
    }
    heap_[i] = e;
  }
  // Refills the root's hole with `e` (the former last element): the smallest child moves up
  // until `e` is no larger than it.
  void sift_last_down(const Event& e) {
    const std::size_t n = heap_.size();
    const unsigned __int128 eo = order(e);
    std::size_t i = 0;
    for (;;) {
      const std::size_t first = 4 * i + 1;
      if (first >= n) break;
      std::size_t best = first;
      unsigned __int128 bo = order(heap_[first]);
      const std::size_t end = first + 4 < n ? first + 4 : n;
      for (std::size_t c = first + 1; c < end; ++c) {
        const unsigned __int128 co = order(heap_[c]);
        if (co < bo) {
          bo = co;
          best = c;
        }
      }
      if (!(bo < eo)) break;
      heap_[i] = heap_[best];
      i = best;
    }
    heap_[i] = e;
  }

  std::vector<Event> heap_;
};

}  // namespace cais
