// NCCL-like collective schedules as pure data: what each rank's channel (one CTA in NCCL) does,
// slice by slice. The GPU model "collective" (nccl_collective_model.h) executes them as packet traffic;
// the unit tests check them without a network.
//
// Ring (NCCL src/device/{all_reduce,all_gather,reduce_scatter}.h, Simple protocol):
//   the per-rank data is split over `channels` contiguous ranges; each channel loops over its
//   range in iterations of nranks x chunk (all_reduce) or chunk (all_gather/reduce_scatter); an
//   iteration is a sequence of primitives (send, recvReduceSend, recvReduceCopySend,
//   recvCopySend, recv, recvReduceCopy), each split into `slices_per_chunk` slices. Every
//   primitive has exactly that many slices, zero-byte ones included, so the step counters of
//   neighbours stay aligned (NCCL posts empty slices for the same reason). The k-th sending
//   slice of rank r is the k-th receiving slice of rank r+1.
// NVLS (NCCL RunWorkElement<AllReduce, NVLS, Simple>): the buffer is split over channels; each
//   channel loops in iterations of nranks x chunk; in each iteration rank j is the head of block
//   j: it multimem.ld_reduce's the block (reduce-scatter through the switch) and multimem.st's
//   the result to every rank (all-gather by multicast). One-shot: every rank ld_reduce's the
//   whole buffer and keeps the result (no store).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace cais::net {

enum class CollOp : std::uint8_t { kAllReduce, kAllGather, kReduceScatter };
enum class CollAlgo : std::uint8_t { kRing, kNvls };

CollOp parse_coll_op(const std::string& s);      // all_reduce | all_gather | reduce_scatter
CollAlgo parse_coll_algo(const std::string& s);  // ring | nvls

enum class Prim : std::uint8_t {
  kSend,                // send own input
  kRecvReduceSend,      // recv partial, add own input, send
  kRecvReduceCopySend,  // recv partial, add own input -> output, send (all_reduce pivot)
  kRecvCopySend,        // recv final -> output, send
  kRecv,                // recv final -> output
  kRecvReduceCopy,      // recv partial, add own input -> output (reduce_scatter last step)
  kCopySend,            // own input -> output, send (all_gather first step)
};
constexpr std::size_t kPrimCount = static_cast<std::size_t>(Prim::kCopySend) + 1;  // keep kCopySend last

inline bool prim_recv(Prim p) { return p != Prim::kSend && p != Prim::kCopySend; }
inline bool prim_send(Prim p) { return p != Prim::kRecv && p != Prim::kRecvReduceCopy; }
inline bool prim_reduce(Prim p) {
  return p == Prim::kRecvReduceSend || p == Prim::kRecvReduceCopySend || p == Prim::kRecvReduceCopy;
}
inline bool prim_writes_output(Prim p) {
  return p == Prim::kRecvReduceCopySend || p == Prim::kRecvCopySend || p == Prim::kRecv ||
         p == Prim::kRecvReduceCopy || p == Prim::kCopySend;
}
// Data a primitive sends is a partial sum (lands in the receiver's reduce buffer) or final
// (lands in its gather buffer).
inline bool prim_sends_final(Prim p) {
  return p == Prim::kRecvReduceCopySend || p == Prim::kRecvCopySend || p == Prim::kCopySend;
}

struct SliceOp {
  Prim prim;
  std::uint64_t offset;  // byte offset in the collective's index space (see RingSchedule)
  std::uint64_t bytes;   // may be 0: a synchronisation-only slice
};

struct RingParams {
  CollOp op = CollOp::kAllReduce;
  std::uint32_t nranks = 2;
  std::uint64_t bytes = 0;         // nccl-tests size: per rank (all_reduce), total (all_gather, reduce_scatter)
  std::uint32_t channels = 1;
  std::uint64_t chunk_bytes = 0;   // per rank-chunk per channel and iteration
  std::uint32_t slices_per_chunk = 2;
  std::uint64_t align_bytes = 16;
};

// Index space: all_reduce -> the buffer [0, bytes); all_gather -> the output [0, bytes) with
// rank b's shard at [b*bytes/n, (b+1)*bytes/n); reduce_scatter -> the input, same layout.
struct RingSchedule {
  std::vector<std::vector<SliceOp>> channels;
  std::uint64_t space_bytes = 0;
  std::uint64_t shard_bytes = 0;
};

RingSchedule build_ring_schedule(const RingParams& p, std::uint32_t rank);

struct NvlsRange {
  std::uint64_t offset, bytes;
};
// Per channel, the byte ranges this rank ld_reduce's, in issue order.
std::vector<std::vector<NvlsRange>> build_nvls_schedule(std::uint64_t bytes, std::uint32_t nranks, std::uint32_t rank,
                                                        std::uint32_t channels, std::uint64_t chunk_bytes,
                                                        std::uint64_t align_bytes);

// Bytes each rank sends on the wire for one ring collective (payload, all channels), the
// analytical count tests compare with: all_reduce 2(n-1)/n x bytes, others (n-1)/n x bytes.
std::uint64_t ring_bytes_sent_per_rank(const RingSchedule& s);

}  // namespace cais::net
