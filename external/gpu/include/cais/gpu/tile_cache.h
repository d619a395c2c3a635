// L2 residency of tiles: an open-addressing hash set of tile keys (linear probing, backward-
// shift deletion) with FIFO eviction by bytes. No allocation per access once grown.
#pragma once
#include <cstdint>
#include <vector>

#include "cais/routing.h"

namespace cais::gpu {

class TileCache {
 public:
  explicit TileCache(std::uint64_t capacity_bytes = 0) : capacity_(capacity_bytes) { rehash(1024); }
  void set_capacity(std::uint64_t bytes) { capacity_ = bytes; }
  std::uint64_t resident_bytes() const { return resident_; }

  bool contains(std::uint64_t key) const {
    if (key == 0) key = 1;
    for (std::size_t i = mix64(key) & mask_; slots_[i] != 0; i = (i + 1) & mask_)
      if (slots_[i] == key) return true;
    return false;
  }
  // True if `key` is resident; otherwise inserts it (evicting the oldest tiles) and returns false.
  bool lookup_insert(std::uint64_t key, std::uint32_t bytes) {
    if (key == 0) key = 1;  // 0 marks an empty slot
    std::size_t i = mix64(key) & mask_;
    while (slots_[i] != 0) {
      if (slots_[i] == key) return true;
      i = (i + 1) & mask_;
    }
    slots_[i] = key;
    ++size_;
    fifo_.push_back({key, bytes});
    resident_ += bytes;
    while (resident_ > capacity_ && head_ < fifo_.size()) {
      resident_ -= fifo_[head_].bytes;
      erase(fifo_[head_].key);
      ++head_;
    }
    if (head_ > 4096 && head_ * 2 > fifo_.size()) {  // compact the FIFO
      fifo_.erase(fifo_.begin(), fifo_.begin() + static_cast<std::ptrdiff_t>(head_));
      head_ = 0;
    }
    if (size_ * 2 > slots_.size()) rehash(slots_.size() * 2);
    return false;
  }

 private:
  struct Entry {
    std::uint64_t key;
    std::uint32_t bytes;
  };
  void erase(std::uint64_t key) {
    std::size_t i = mix64(key) & mask_;
    while (slots_[i] != key) {
      if (slots_[i] == 0) return;
      i = (i + 1) & mask_;
    }
    slots_[i] = 0;
    --size_;
    // backward shift: move later members of the probe run into the hole
    std::size_t j = i;
    for (;;) {
      j = (j + 1) & mask_;
      if (slots_[j] == 0) return;
      const std::size_t home = mix64(slots_[j]) & mask_;
      if (((j - home) & mask_) >= ((j - i) & mask_)) {
        slots_[i] = slots_[j];
        slots_[j] = 0;
        i = j;
      }
    }
  }
  void rehash(std::size_t n) {
    std::vector<std::uint64_t> old;
    old.swap(slots_);
    slots_.assign(n, 0);
    mask_ = n - 1;
    size_ = 0;
    for (std::uint64_t k : old)
      if (k) {
        std::size_t i = mix64(k) & mask_;
        while (slots_[i] != 0) i = (i + 1) & mask_;
        slots_[i] = k;
        ++size_;
      }
  }

  std::uint64_t capacity_ = 0, resident_ = 0;
  std::vector<std::uint64_t> slots_;
  std::size_t mask_ = 0, size_ = 0;
  std::vector<Entry> fifo_;
  std::size_t head_ = 0;
};

}  // namespace cais::gpu
