#include "cais/gpu/remote_read_cache.h"

#include "cais/errors.h"
#include "cais/gpu/block_executor.h"
#include "cais/gpu/local_memory.h"
#include "cais/gpu/tb_scheduler.h"
#include "cais/gpu/tile_registers.h"

namespace cais::gpu {

RemoteReadCache::Outcome RemoteReadCache::lookup(std::uint64_t key, std::uint64_t bytes, std::uint32_t tbi,
                                                 std::uint32_t reg, std::uint32_t pc, std::size_t elements,
                                                 TimePs& done) {
  Tb& tb = ctx_.sched->tb(tbi);
  if (ctx_.mem->l2_resident(key)) {
    ++hits_;
    done = ctx_.mem->access(ctx_.now(), tb.sm, key, bytes, false);
    ctx_.mem->count_tile(false, bytes);
    if (ctx_.functional && reg) {
      const auto v = values_.find(key);
      if (v == values_.end() || v->second.size() != elements)
        throw InvariantError(ctx_.name() + ": a cached remote tile without its values");
      ctx_.regs->begin_load(tbi, reg, elements, pc, false, done) = v->second;
    }
    return Outcome::kHit;
  }
  const auto it = in_flight_.find(key);
  if (it == in_flight_.end()) {
    ++fetches_;
    in_flight_.emplace(key, std::vector<Joiner>{});
    return Outcome::kFetch;
  }
  ++joins_;
  it->second.push_back({tbi, reg});
  ++tb.outstanding;
  ++tb.remote_loads;
  if (ctx_.functional && reg) ctx_.regs->begin_load(tbi, reg, elements, pc, true, 0);
  return Outcome::kJoined;
}

void RemoteReadCache::filled(std::uint64_t key, std::uint64_t bytes, std::uint32_t tbi, std::uint32_t reg) {
  const auto it = in_flight_.find(key);
  if (it == in_flight_.end()) throw InvariantError(ctx_.name() + ": a remote tile filled that was not in flight");
  std::vector<Joiner> joiners = std::move(it->second);
  in_flight_.erase(it);
  ctx_.mem->l2_fill(key, bytes);
  const std::vector<double>* values = nullptr;
  if (ctx_.functional && reg) {
    values = &(values_[key] = ctx_.regs->values(tbi, reg));
  }
  for (const Joiner& j : joiners) {
    if (ctx_.functional && j.reg) {
      if (!values) throw InvariantError(ctx_.name() + ": a block joined a remote tile fetched without its values");
      ctx_.regs->values(j.tbi, j.reg) = *values;
      ctx_.regs->remote_load_done(j.tbi, j.reg);
    }
    ctx_.exec->mem_op_done(j.tbi);
    ctx_.exec->remote_load_done(j.tbi);
  }
}

}  // namespace cais::gpu
