#!/usr/bin/env bash
# Build the native engines (external/) into build/external. Usage: scripts/build_engines.sh [jobs]
set -euo pipefail
cd "$(dirname "$0")/.."
jobs="${1:-$(nproc)}"
cmake -S external -B build/external -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build/external -j "$jobs"
