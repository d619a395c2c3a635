// In-memory packet, pooled; crosses process boundaries as a record (cais/packet_records.h).
#pragma once
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "cais/time.h"
#include "cosim.pb.h"

namespace cais {

using PacketType = proto::PacketType;
// Tables indexed by packet type (per-type statistics, VC ranges) have this many slots.
inline constexpr std::size_t kPacketTypes = 32;
static_assert(proto::PacketType_ARRAYSIZE <= static_cast<int>(kPacketTypes), "a packet type outgrew the per-type tables");
using PacketHandle = std::uint32_t;
inline constexpr PacketHandle kNoPacket = 0xffffffffu;
// Most lines one bulk packet carries (gpu.bulk_lines).
inline constexpr std::uint32_t kMaxBulkLines = 16;

// The fixed-size fields of a packet: what PacketPool resets when it hands a slot out again.
// 64-bit fields first, so the head has no holes and ends in the slot's second cache line.
struct PacketHead {
  std::uint64_t id = 0;        // (creator component << 40) | creator sequence
  std::uint64_t hop_key = 0;   // ordering key of the arrival event at hop_dst
  TimePs arrival_ps = 0;
  std::uint64_t addr = 0;
  std::uint64_t tag = 0;
  TimePs inject_ps = 0;
  TimePs tail_ps = 0;  // announced at its head: when its tail arrives (0: announced at the tail)
  PacketType type = proto::PKT_UNSPECIFIED;
  std::uint32_t src = 0;
  std::uint32_t dst = 0;
  std::uint32_t hop_dst = 0;
  std::uint32_t hop_port = 0;
  std::uint32_t vc = 0;
  std::uint32_t payload_bytes = 0;
  std::uint32_t flits = 0;
  std::uint32_t group = 0;
  std::uint32_t origin = 0;
  std::uint32_t count = 0;
  std::uint32_t aux = 0;
  // Bulk packet (gpu.bulk_lines): `lines` lines of equal size, line 0 at `addr`, line i at
  // more_lines[i-1]; sizes (payload_bytes, a request's bytes in aux/count) are the total.
  // It stands for `lines` separate packets: their header flits are in `flits`, statistics
  // count it as `lines` packets, and every packet made in answer to it carries the same lines.
  std::uint32_t lines = 1;
};
static_assert(sizeof(PacketHead) == 112, "no holes");

// A pool slot is four cache lines, aligned: the head and the functional values' pointers fill
// the first two (all a one-line packet without values touches), a bulk packet's further line
// addresses the rest. (The first touch of a recycled slot is a cache miss: one fewer line, one
// fewer miss.)
struct alignas(64) Packet : PacketHead {
  std::vector<double> values;  // functional mode only (line after line); capacity is kept across reuse
  // Lines 1..lines-1 of a bulk packet. Not reset on reuse: only the first lines - 1 are read,
  // and whoever sets lines > 1 writes them.
  std::array<std::uint64_t, kMaxBulkLines - 1> more_lines{};

  std::uint64_t line_addr(std::uint32_t i) const { return i ? more_lines[i - 1] : addr; }
  // The line set of `o` (an answer, a copy or a forwarded part of a bulk packet).
  void copy_lines(const Packet& o) {
    lines = o.lines;
    std::copy_n(o.more_lines.begin(), lines - 1, more_lines.begin());  // only these are ever read
  }
};
static_assert(sizeof(Packet) == 256, "four cache lines");

// Free-list pool: packets are recycled, so the hot path never allocates once warmed up.
// Slots live in fixed blocks of 256 that never move, so a Packet& stays valid when alloc()
// grows the pool (code that holds a reference across new_packet() stays correct), and a
// handle is found with a shift and a mask (a deque of ~260-byte packets holds two per chunk).
class PacketPool {
 public:
  PacketHandle alloc() {
    if (free_.empty()) {
      if (size_ == blocks_.size() * kBlock) blocks_.push_back(std::make_unique<Packet[]>(kBlock));
      ++live_;
      return static_cast<PacketHandle>(size_++);
    }
    const PacketHandle h = free_.back();
    free_.pop_back();
    Packet& p = (*this)[h];
    static const PacketHead kFresh{};  // copied, not built: building a temporary cost a slow `rep stos`
    static_cast<PacketHead&>(p) = kFresh;
    p.values.clear();  // keeps its capacity
    ++live_;
    return h;
  }
  // A slot for a caller that sets every field of PacketHead itself (cais/packet_records.h's
  // read_record): alloc() without the reset it would overwrite.
  PacketHandle take() {
    if (free_.empty()) return alloc();
    const PacketHandle h = free_.back();
    free_.pop_back();
    ++live_;
    return h;
  }
  void release(PacketHandle h) {
    free_.push_back(h);
    --live_;
  }
  Packet& operator[](PacketHandle h) { return blocks_[h >> kBlockBits][h & (kBlock - 1)]; }
  const Packet& operator[](PacketHandle h) const { return blocks_[h >> kBlockBits][h & (kBlock - 1)]; }
  std::size_t live() const { return live_; }

 private:
  static constexpr std::uint32_t kBlockBits = 8, kBlock = 1u << kBlockBits;
  std::vector<std::unique_ptr<Packet[]>> blocks_;
  std::vector<PacketHandle> free_;
  std::size_t size_ = 0, live_ = 0;
};

// Flits a packet occupies on a link: one header flit plus the payload rounded up to flits.
inline std::uint32_t flits_for(std::uint32_t payload_bytes, std::uint32_t flit_bytes,
                               std::uint32_t header_flits) {
  return header_flits + (payload_bytes + flit_bytes - 1) / flit_bytes;
}

// Flits of `lines` separate packets of payload_bytes / lines each (a bulk packet's wire size).
inline std::uint32_t flits_for_lines(std::uint32_t payload_bytes, std::uint32_t lines, std::uint32_t flit_bytes,
                                     std::uint32_t header_flits) {
  return lines * flits_for(payload_bytes / lines, flit_bytes, header_flits);
}

}  // namespace cais
