#include "cais/component.h"

#include "cais/sim.h"

namespace cais {

Component::Component(Sim& sim, std::string name, std::uint32_t stable_id)
    : sim_(sim), name_(std::move(name)), id_(stable_id) {}

void Component::schedule(TimePs t, std::uint32_t kind, std::uint64_t arg, std::uint32_t arg32) {
  sim_.push(Event{t, next_key(), this, kind, arg32, arg});
}

}  // namespace cais
