// NVLink hub of a Hopper GPU: what arrives over NVLink. Requests for this GPU's memory are
// served after an L2/HBM access (READ_REQ -> READ_RESP, WRITE -> WRITE_ACK, CAIS_LD_REQ ->
// CAIS_LD_RESP, MM_LD_REDUCE_REQ -> MM_LD_REDUCE_RESP); reductions and multicast stores are
// applied to memory (MM_ACK back with NVLS member acks; a CAIS_RED is also counted by
// RedArrivals, red_arrivals.h); responses go to the packetizer;
// SYNC_RELEASE to group sync; THROTTLE to the packetizer; flag writes to the flag table.
#pragma once
#include <cstdint>

#include "cais/gpu/gpu_context.h"

namespace cais::gpu {

class NvlinkHub {
 public:
  explicit NvlinkHub(GpuContext& ctx) : ctx_(ctx) {}
  void on_arrival(PacketHandle h);
  void on_respond(PacketHandle h);  // kRespond: the memory access of a request is done
  std::uint64_t& served_requests() { return served_requests_; }

 private:
  void serve(PacketHandle h);

  GpuContext& ctx_;
  std::uint64_t served_requests_ = 0;
};

}  // namespace cais::gpu
