// The order in which one issue queue (an SM's, or the copy engine's) hands out line slots to
// its remote ops. Ops belong to streams: an SM queue has one stream per resident thread block
// (its warps), the copy engine one stream for all its ops (it serves its commands in order).
// A stream's ops are served in program order: only its oldest op (its head) is in the rotation.
// The heads of different streams share the queue round robin, as the warps of an SM's resident
// blocks interleave their loads: the op at the cursor takes its turn, the cursor moves past it.
// At most `open_limit` heads are in the rotation at once (the others wait, oldest first): with
// bulk packets an op in the rotation may hold lines back in partly filled packets, and the lines
// all of them hold back must stay below the outstanding limit (remote_packetizer.cc).
// Its bookkeeping changes per op, never per line: nothing is allocated on the line path.
#pragma once
#include <cstddef>
#include <cstdint>
#include <deque>
#include <limits>
#include <vector>

namespace cais::gpu {

class IssueQueue {
 public:
  static constexpr std::size_t kNoLimit = std::numeric_limits<std::size_t>::max();
  std::uint32_t outstanding = 0;  // requests in flight (lines of non-posted ops)

  void set_open_limit(std::size_t k);
  // Queue op `oi` of `stream` behind that stream's earlier ops.
  void push(std::uint32_t oi, std::uint32_t stream);
  // Ops in the rotation, and the k-th of them from the cursor (k < rotating()).
  std::size_t rotating() const { return active_.size(); }
  std::uint32_t at(std::size_t k) const { return active_[(cursor_ + k) % active_.size()].op; }
  // The op k-th from the cursor took a turn: the cursor moves past it.
  void turn_taken(std::size_t k);
  // Op `oi` (in the rotation) has been cut whole: its stream's next op queues for the rotation.
  void pop(std::uint32_t oi);
  bool empty() const { return active_.empty() && waiting_.empty(); }

 private:
  struct Entry {
    std::uint32_t op, stream;
  };
  bool has_stream(std::uint32_t stream) const;
  void admit();  // move waiting heads into the rotation, last in the current round

  std::vector<Entry> active_;  // heads in the rotation
  std::deque<Entry> waiting_;  // heads waiting for a place in the rotation, oldest first
  std::vector<Entry> later_;   // ops behind their stream's head, in arrival order
  std::size_t cursor_ = 0, open_limit_ = kNoLimit;
};

}  // namespace cais::gpu
