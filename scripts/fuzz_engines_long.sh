#!/usr/bin/env bash
# The long run of the engine fuzz targets with the seeded mutator (docs/FUZZING.md): TARGET for
# CHUNKS chunks of 50000 inputs (chunk i uses seed i, from FIRST_SEED on, so a stopped run resumes
# where its log ends), one line of figures per chunk, at the lowest CPU priority.
# Usage: scripts/fuzz_engines_long.sh TARGET [CHUNKS=20] [FIRST_SEED=1]
set -euo pipefail
cd "$(dirname "$0")/.."
target="$1"
chunks="${2:-20}"
first="${3:-1}"
for seed in $(seq "$first" $((first + chunks - 1))); do
  nice -n 19 build/external/cais-fuzz "$target" --runs 50000 --seed "$seed" --crash-dir "${TMPDIR:-/tmp}/cais-fuzz-findings"
done
