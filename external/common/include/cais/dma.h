// PKT_DMA's operation, shared by the GPUs that issue DMA writes and the switch's NVLS feature
// (feature_nvls.h) that multicasts them: aux = (op << 16) | group size.
//   kUnicast          a DMA write to dst, forwarded untouched; the receiver stores and answers
//                     WRITE_ACK;
//   kMulticastStore   multicast like MM_ST; the copies carry kStoreCopy;
//   kMulticastReduce  multicast like MM_RED; the copies carry kReduceCopy (members add);
//   kReduceCopy       also a unicast write that adds at the destination (T3's near-memory
//                     op-and-store) when a GPU sends it (origin = a GPU): the switch forwards it,
//                     the receiver adds and answers WRITE_ACK.
#pragma once
#include <cstdint>

namespace cais {

enum class DmaOp : std::uint32_t {
  kUnicast = 0,
  kMulticastStore = 1,
  kMulticastReduce = 2,
  kStoreCopy = 3,
  kReduceCopy = 4,
};
inline std::uint32_t dma_aux(DmaOp op, std::uint32_t group_size) {
  return (static_cast<std::uint32_t>(op) << 16) | (group_size & 0xffffu);
}
inline DmaOp dma_op(std::uint32_t aux) { return static_cast<DmaOp>(aux >> 16); }
inline std::uint32_t dma_group_size(std::uint32_t aux) { return aux & 0xffffu; }

}  // namespace cais
