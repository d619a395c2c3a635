// A seeded byte mutator and run loop: the fuzzer of every build (no clang, no coverage
// feedback), used by the test suite's short run and by cais-fuzz for documented long runs.
#pragma once
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "cais/fuzz/targets.h"

namespace cais::fuzz {

// Every file of `dir` (sorted by name); an empty list when the folder is missing.
std::vector<std::string> load_corpus(const std::string& dir);

// One mutation of `seed`: 1..8 byte edits (flips, interesting values, inserts, erases, copies,
// splices with `other`, truncation), as libFuzzer's default mutators do.
std::string mutate(const std::string& seed, const std::string& other, std::mt19937_64& rng);

struct RunStats {
  std::uint64_t inputs = 0;
  double seconds = 0;
  double slowest_ms = 0;
};

// Runs `target` on every seed, then on `runs` mutations of random seeds. An input that runs
// longer than hang_ms is a finding (a watchdog aborts the process, naming the input file it
// wrote to crash_dir); so is any abort of the target itself.
RunStats run_mutations(const Target& target, const std::vector<std::string>& corpus, std::uint64_t runs,
                       std::uint64_t seed, double hang_ms, const std::string& crash_dir);

}  // namespace cais::fuzz
