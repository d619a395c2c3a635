#include "cais/net/collective_schedule.h"

#include <algorithm>

#include "cais/errors.h"

namespace cais::net {
namespace {

std::uint64_t align_up(std::uint64_t v, std::uint64_t a) { return (v + a - 1) / a * a; }
std::uint64_t div_up(std::uint64_t v, std::uint64_t d) { return (v + d - 1) / d; }
std::uint64_t clamp_len(std::int64_t v, std::uint64_t hi) {
  return v <= 0 ? 0 : std::min<std::uint64_t>(static_cast<std::uint64_t>(v), hi);
}

void add_prim(std::vector<SliceOp>& ops, Prim prim, std::uint64_t offset, std::uint64_t bytes, std::uint32_t slices,
              std::uint64_t align) {
  const std::uint64_t slice = bytes == 0 ? 0 : align_up(div_up(bytes, slices), align);
  for (std::uint32_t s = 0; s < slices; ++s) {
    const std::uint64_t begin = std::min<std::uint64_t>(bytes, s * slice);
    const std::uint64_t len = std::min<std::uint64_t>(bytes - begin, slice);
    ops.push_back(SliceOp{prim, offset + begin, len});
  }
}

}  // namespace

CollOp parse_coll_op(const std::string& s) {
  if (s == "all_reduce") return CollOp::kAllReduce;
  if (s == "all_gather") return CollOp::kAllGather;
  if (s == "reduce_scatter") return CollOp::kReduceScatter;
  throw ConfigError("collective.op", quote(s) + " is not one of: all_reduce, all_gather, reduce_scatter");
}

CollAlgo parse_coll_algo(const std::string& s) {
  if (s == "ring") return CollAlgo::kRing;
  if (s == "nvls") return CollAlgo::kNvls;
  throw ConfigError("collective.algo", quote(s) + " is not one of: ring, nvls");
}

RingSchedule build_ring_schedule(const RingParams& p, std::uint32_t rank) {
  const std::uint32_t n = p.nranks;
  if (n < 2) throw ConfigError("system.gpus", "a ring collective needs at least 2 ranks");
  if (p.channels == 0) throw ConfigError("collective.channels", "must be >= 1");
  if (p.chunk_bytes == 0 || p.chunk_bytes % p.align_bytes)
    throw ConfigError("collective.chunk_bytes", "must be a positive multiple of " + std::to_string(p.align_bytes));
  if (p.slices_per_chunk == 0) throw ConfigError("collective.slices_per_chunk", "must be >= 1");
  RingSchedule s;
  s.channels.resize(p.channels);
  const std::uint32_t S = p.slices_per_chunk;
  const std::uint64_t A = p.align_bytes;
  const std::uint64_t C = p.chunk_bytes;
  auto mod = [n](std::uint32_t v) { return v % n; };

  if (p.op == CollOp::kAllReduce) {
    s.space_bytes = p.bytes;
    s.shard_bytes = p.bytes;
    const std::uint64_t chan_bytes = align_up(div_up(p.bytes, p.channels), A);
    for (std::uint32_t c = 0; c < p.channels; ++c) {
      const std::uint64_t start = std::min<std::uint64_t>(p.bytes, c * chan_bytes);
      const std::uint64_t len = std::min<std::uint64_t>(p.bytes - start, chan_bytes);
      auto& ops = s.channels[c];
      for (std::uint64_t eo = 0; eo < len;) {
        const std::uint64_t rem = len - eo;
        const std::uint64_t cb = rem < n * C ? align_up(div_up(rem, n), A) : C;
        auto block = [&](std::uint32_t b, Prim prim) {
          const auto nb = clamp_len(static_cast<std::int64_t>(rem) - static_cast<std::int64_t>(b * cb), cb);
          add_prim(ops, prim, start + eo + std::min<std::uint64_t>(rem, b * cb), nb, S, A);
        };
        block(mod(rank + n - 1), Prim::kSend);
        for (std::uint32_t j = 2; j < n; ++j) block(mod(rank + n - j), Prim::kRecvReduceSend);
        block(rank, Prim::kRecvReduceCopySend);
        for (std::uint32_t j = 1; j < n - 1; ++j) block(mod(rank + n - j), Prim::kRecvCopySend);
        block(mod(rank + 1), Prim::kRecv);
        eo += n * cb;
      }
    }
    return s;
  }

  // all_gather / reduce_scatter: bytes is the total over ranks; each rank's shard is bytes/n.
  if (p.bytes % n) throw ConfigError("collective.bytes", "must be a multiple of the number of ranks for all_gather/reduce_scatter");
  const std::uint64_t shard = p.bytes / n;
  s.space_bytes = p.bytes;
  s.shard_bytes = shard;
  const std::uint64_t chan_bytes = align_up(div_up(shard, p.channels), A);
  for (std::uint32_t c = 0; c < p.channels; ++c) {
    const std::uint64_t start = std::min<std::uint64_t>(shard, c * chan_bytes);
    const std::uint64_t len = std::min<std::uint64_t>(shard - start, chan_bytes);
    auto& ops = s.channels[c];
    for (std::uint64_t eo = 0; eo < len;) {
      const std::uint64_t nb = std::min<std::uint64_t>(C, len - eo);
      auto block = [&](std::uint32_t b, Prim prim) { add_prim(ops, prim, b * shard + start + eo, nb, S, A); };
      if (p.op == CollOp::kAllGather) {
        block(rank, Prim::kCopySend);
        for (std::uint32_t j = 1; j < n - 1; ++j) block(mod(rank + n - j), Prim::kRecvCopySend);
        block(mod(rank + 1), Prim::kRecv);
      } else {
        block(mod(rank + n - 1), Prim::kSend);
        for (std::uint32_t j = 2; j < n; ++j) block(mod(rank + n - j), Prim::kRecvReduceSend);
        block(rank, Prim::kRecvReduceCopy);
      }
      eo += nb;
    }
  }
  return s;
}

std::vector<std::vector<NvlsRange>> build_nvls_schedule(std::uint64_t bytes, std::uint32_t n, std::uint32_t rank,
                                                        std::uint32_t channels, std::uint64_t chunk, std::uint64_t A) {
  if (channels == 0) throw ConfigError("collective.channels", "must be >= 1");
  if (chunk == 0 || chunk % A)
    throw ConfigError("collective.nvls_chunk_bytes", "must be a positive multiple of " + std::to_string(A));
  std::vector<std::vector<NvlsRange>> out(channels);
  const std::uint64_t chan_bytes = align_up(div_up(bytes, channels), A);
  for (std::uint32_t c = 0; c < channels; ++c) {
    const std::uint64_t start = std::min<std::uint64_t>(bytes, c * chan_bytes);
    const std::uint64_t len = std::min<std::uint64_t>(bytes - start, chan_bytes);
    for (std::uint64_t eo = 0; eo < len;) {
      const std::uint64_t rem = len - eo;
      const std::uint64_t cb = rem < n * chunk ? align_up(div_up(rem, n), A) : chunk;
      const auto nb = clamp_len(static_cast<std::int64_t>(rem) - static_cast<std::int64_t>(rank * cb), cb);
      if (nb) out[c].push_back(NvlsRange{start + eo + rank * cb, nb});
      eo += n * cb;
    }
  }
  return out;
}

std::uint64_t ring_bytes_sent_per_rank(const RingSchedule& s) {
  std::uint64_t total = 0;
  for (const auto& ch : s.channels)
    for (const auto& op : ch)
      if (prim_send(op.prim)) total += op.bytes;
  return total;
}

}  // namespace cais::net
