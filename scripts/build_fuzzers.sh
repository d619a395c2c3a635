#!/usr/bin/env bash
# Build the libFuzzer targets (AddressSanitizer + UndefinedBehaviorSanitizer) into build/fuzz:
# fuzz-engine_host, fuzz-packet_batch, fuzz-workload, fuzz-booksim. Needs clang
# (apt-get install clang libclang-rt-dev). Usage: scripts/build_fuzzers.sh [jobs]
set -euo pipefail
cd "$(dirname "$0")/.."
jobs="${1:-$(nproc)}"
clang="${CXX:-$(command -v clang++ || command -v clang++-14 || true)}"
if [ -z "$clang" ]; then
  echo "build_fuzzers.sh: clang++ not found; install clang (or set CXX), or use build/external/cais-fuzz" >&2
  exit 2
fi
cmake -S external -B build/fuzz -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER="$clang" -DCAIS_FUZZ=ON >/dev/null
cmake --build build/fuzz -j "$jobs" --target fuzz-engine_host fuzz-packet_batch fuzz-workload fuzz-booksim
