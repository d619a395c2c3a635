// NVLink SHARP (NVLS) in the switch, as switch feature "nvls".
//
// Follows NVIDIA's public description of NVLS (NVSwitch Hot Chips 2022; NCCL NVLS algorithms):
// a multimem address names one line in every GPU of a multicast group, and the switch
//   MM_ST             multicasts the store: one copy (MM_ST, dst = member) to every member of
//                     the group, the issuer included;
//   MM_RED            multicasts the reduction: one copy (MM_RED) to every member, which adds
//                     the values into its memory (no reduction happens in the switch);
//   MM_LD_REDUCE_REQ  reads the line from every member (it generates READ_REQs, src = the
//                     requester, tag = a switch tag with bit 63 set, aux = bytes), reduces the
//                     READ_RESPs (values summed element-wise in functional mode) and answers
//                     the requester with one MM_LD_REDUCE_RESP (count = members reduced).
// Completion: the issuer of a multicast gets exactly one MM_ACK (count = members). With
// member_acks (NVLS's completion at memory) each member answers its copy with MM_ACK (dst = the
// copy's src = the issuer, same addr and tag) and the switch absorbs those acks and answers
// the issuer when the last is in; without, members send nothing and the switch acks the issuer
// as soon as the copies leave (completion at the switch; no ack traffic on member links).
// The group of a request is GPUs [base, base + aux), base = src / aux * aux (CONTRACTS.md);
// MM_LD_REDUCE_REQ carries the bytes it asks for in `count`. The first switch a request
// reaches replicates it; its copies carry origin = that switch and pass later switches
// (multi-level fabrics) untouched, so each copy crosses the fabric on its own (no tree).
// Tags of the reads an ld_reduce generates have bit 63 set; a READ_RESP is taken only when its
// tag is one of those still outstanding here.
// Every packet the switch makes (copies, reads, reduced responses, acks) is queued at the output
// toward its dst (SwitchContext::inject_at_output): an NVSwitch replicates and reduces in its
// crossbar, so the copies of a multicast leave their outputs concurrently instead of crossing
// the crossbar one after another from the port the request came in on.
//
// DMA-driven NVLS (T3-NVLS; NVIDIA's DMA-based NVLS design): a PKT_DMA carries its operation
// and group size in aux = (op << 16) | group_size (cais/dma.h):
//   kUnicast          an ordinary DMA write to dst, forwarded untouched;
//   kMulticastStore   multicast like MM_ST; copies are PKT_DMA with op kStoreCopy;
//   kMulticastReduce  multicast like MM_RED; copies are PKT_DMA with op kReduceCopy (the
//                     member adds the values into its memory).
// Members answer a copy with MM_ACK exactly as for MM_ST; the issuer gets one MM_ACK.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "cais/dma.h"
#include "cais/net/feature_util.h"
#include "cais/net/switch_feature.h"
#include "cais/stats.h"

namespace cais::net {

struct NvlsConfig {
  TimePs multicast_delay_ps = 0;  // replication of a multicast request into its copies
  TimePs reduce_delay_ps = 0;     // reduction of the last read response of an ld_reduce
  bool member_acks = false;       // members ack copies; else the switch acks at replication
  PacketShape shape;
  static NvlsConfig from_params(const Params& p);
};

class Nvls : public SwitchFeature {
 public:
  Nvls(const NvlsConfig& cfg, std::uint32_t switch_node);

  Verdict on_arrival(SwitchContext& ctx, std::uint32_t in_port, PacketHandle h) override;
  void register_stats(StatsRegistry& reg, const std::string& prefix) const override;
  void check_drained() const override;
  bool idle() const override { return acks_.empty() && reads_.empty(); }

  std::uint64_t multicasts() const { return multicasts_; }
  std::uint64_t copies() const { return copies_; }
  std::uint64_t ld_reduces() const { return ld_reduces_; }
  std::uint64_t acks_sent() const { return acks_sent_; }

 private:
  // Bulk packets (cais/packet.h): every copy, read, answer and ack carries the request's lines.
  struct AckWait {
    std::uint32_t remaining = 0, members = 0, lines = 1;
    TimePs inject_ps = 0;
  };
  struct ReadWait {
    std::uint32_t requester = 0, remaining = 0, members = 0, group = 0, aux = 0;
    std::uint32_t payload_bytes = 0, resp_flits = 0;
    std::uint64_t addr = 0, tag = 0;
    std::uint32_t lines = 1;
    std::array<std::uint64_t, kMaxBulkLines - 1> more_lines{};
    TimePs inject_ps = 0;
    std::vector<double> sum;
  };
  // Copies of `h` to every member of its group; the original is released.
  void multicast(SwitchContext& ctx, PacketHandle h, std::uint32_t group_size, std::uint32_t copy_aux);
  void ld_reduce(SwitchContext& ctx, PacketHandle h);
  Verdict on_ack(SwitchContext& ctx, PacketHandle h);
  void send_ack(SwitchContext& ctx, std::uint32_t issuer, std::uint64_t addr, std::uint64_t tag,
                std::uint32_t members, std::uint32_t lines, TimePs inject_ps, TimePs delay_ps);
  Verdict on_read_resp(SwitchContext& ctx, PacketHandle h);
  std::uint32_t group_base(SwitchContext& ctx, std::uint32_t src, std::uint32_t size) const;

  NvlsConfig cfg_;
  std::uint32_t node_;
  std::uint64_t next_tag_ = 0;
  using AckTable = std::unordered_map<PairKey, AckWait, PairKeyHash>;
  using ReadTable = std::unordered_map<std::uint64_t, ReadWait>;
  AckTable acks_;    // (issuer, tag) -> acks missing
  ReadTable reads_;  // switch tag -> ld_reduce
  RecycledNodes<AckTable> ack_nodes_;
  RecycledNodes<ReadTable> read_nodes_;
  std::uint64_t multicasts_ = 0, copies_ = 0, ld_reduces_ = 0, reads_sent_ = 0, acks_sent_ = 0;
  std::uint64_t dma_multicasts_ = 0;
};

}  // namespace cais::net
