// cais-fuzz: the seeded mutator over one target's seed corpus, for builds without libFuzzer.
//   cais-fuzz TARGET [--runs N] [--seed S] [--hang-ms MS] [--crash-dir DIR]
// Prints one line of figures (inputs, seconds, executions/s, slowest input); exit 0 when no
// input crashed or hung (a finding aborts the process, naming the input it saved).
#include <cstdio>
#include <iostream>
#include <string>

#include "cais/fuzz/mutator.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: cais-fuzz TARGET [--runs N] [--seed S] [--hang-ms MS] [--crash-dir DIR]\n  TARGET:";
    for (const auto& t : cais::fuzz::all_targets()) std::cerr << " " << t.name;
    std::cerr << "\n";
    return 2;
  }
  const cais::fuzz::Target* target = cais::fuzz::find_target(argv[1]);
  if (target == nullptr) {
    std::cerr << "cais-fuzz: unknown target '" << argv[1] << "' (run without arguments for the list)\n";
    return 2;
  }
  std::uint64_t runs = 10000, seed = 1;
  double hang_ms = 10000;
  std::string crash_dir = "fuzz-findings";
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    try {
      if (a == "--runs") runs = std::stoull(v);
      else if (a == "--seed") seed = std::stoull(v);
      else if (a == "--hang-ms") hang_ms = std::stod(v);
      else if (a == "--crash-dir") crash_dir = v;
      else throw std::invalid_argument(a);
    } catch (const std::exception&) {
      std::cerr << "cais-fuzz: bad option '" << a << " " << v << "' (allowed: --runs N, --seed S, --hang-ms MS, "
                << "--crash-dir DIR)\n";
      return 2;
    }
  }
  const auto corpus = cais::fuzz::load_corpus(cais::fuzz::corpus_root() + "/" + target->name);
  if (corpus.empty()) {
    std::cerr << "cais-fuzz: no seeds in " << cais::fuzz::corpus_root() << "/" << target->name << "\n";
    return 2;
  }
  cais::fuzz::quiet_engine_output();
  const auto st = cais::fuzz::run_mutations(*target, corpus, runs, seed, hang_ms, crash_dir);
  std::printf("%s: %llu inputs (%zu seeds), %.1f s, %.0f exec/s, slowest %.1f ms, 0 crashes, 0 hangs\n",
              target->name, static_cast<unsigned long long>(st.inputs), corpus.size(), st.seconds,
              st.inputs / st.seconds, st.slowest_ms);
  return 0;
}
