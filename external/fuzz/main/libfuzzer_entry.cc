// libFuzzer entry point of one target (CAIS_FUZZ_TARGET names it; one binary per target).
#include <cstdio>
#include <cstdlib>

#include "cais/fuzz/targets.h"

namespace {
const cais::fuzz::Target* target = nullptr;
}

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  target = cais::fuzz::find_target(CAIS_FUZZ_TARGET);
  if (target == nullptr) cais::fuzz::finding("no fuzz target named " CAIS_FUZZ_TARGET);
  cais::fuzz::quiet_engine_output();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return target->run(data, size);
}
