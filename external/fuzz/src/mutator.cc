#include "cais/fuzz/mutator.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

namespace cais::fuzz {

std::vector<std::string> load_corpus(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec))
    if (e.is_regular_file()) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {
    std::ifstream in(f, std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    out.push_back(ss.str());
  }
  return out;
}

std::string mutate(const std::string& seed, const std::string& other, std::mt19937_64& rng) {
  static const std::uint8_t interesting[] = {0, 1, 0x7f, 0x80, 0xff, 0xfe, 0x10, 0x40, '\n', ';', '=', '{', '}', ','};
  std::string s = seed;
  auto pick = [&](std::size_t n) { return n == 0 ? 0 : static_cast<std::size_t>(rng() % n); };
  const int edits = 1 + static_cast<int>(rng() % 8);
  for (int e = 0; e < edits; ++e) {
    switch (rng() % 9) {
      case 0:  // flip a bit
        if (!s.empty()) s[pick(s.size())] ^= static_cast<char>(1u << (rng() % 8));
        break;
      case 1:  // a random byte
        if (!s.empty()) s[pick(s.size())] = static_cast<char>(rng());
        break;
      case 2:  // an interesting byte
        if (!s.empty()) s[pick(s.size())] = static_cast<char>(interesting[pick(sizeof interesting)]);
        break;
      case 3:  // insert random bytes
        s.insert(pick(s.size() + 1), std::string(1 + pick(8), static_cast<char>(rng())));
        break;
      case 4:  // erase a range
        if (!s.empty()) {
          const std::size_t at = pick(s.size());
          s.erase(at, 1 + pick(std::min<std::size_t>(16, s.size() - at)));
        }
        break;
      case 5:  // copy a range elsewhere
        if (!s.empty()) {
          const std::size_t from = pick(s.size());
          const std::string chunk = s.substr(from, 1 + pick(32));
          s.insert(pick(s.size() + 1), chunk);
        }
        break;
      case 6:  // splice with another seed
        if (!other.empty()) s = s.substr(0, pick(s.size() + 1)) + other.substr(pick(other.size()));
        break;
      case 7:  // truncate
        s.resize(pick(s.size() + 1));
        break;
      case 8:  // a large little-endian varint-ish value (counts, indices, sizes)
        if (!s.empty()) {
          const std::size_t at = pick(s.size());
          for (std::size_t i = at; i < std::min(s.size(), at + 1 + pick(9)); ++i) s[i] = static_cast<char>(0xff);
        }
        break;
    }
  }
  return s;
}

namespace {

// The input under test, written to disk only when the process dies on it (a crash, an abort of
// a finding, the watchdog's abort on a hang): writing every input to a file cost ~2 ms each on
// a busy disk, 20-50x the work of most inputs.
std::atomic<const std::string*> g_input{nullptr};  // lock-free: read in a signal handler
char g_input_path[4096];

void save_input_and_die(int sig) {
  if (const std::string* in = g_input.load()) {
    const int fd = ::open(g_input_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);  // async-signal-safe
    if (fd >= 0) {
      for (std::size_t done = 0; done < in->size();) {
        const ssize_t n = ::write(fd, in->data() + done, in->size() - done);
        if (n <= 0) break;
        done += static_cast<std::size_t>(n);
      }
      ::close(fd);
    }
  }
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

void save_input_on_fatal_signals(const std::string& path) {
  std::snprintf(g_input_path, sizeof g_input_path, "%s", path.c_str());
  for (int sig : {SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL}) std::signal(sig, save_input_and_die);
}

}  // namespace

RunStats run_mutations(const Target& target, const std::vector<std::string>& corpus, std::uint64_t runs,
                       std::uint64_t seed, double hang_ms, const std::string& crash_dir) {
  std::mt19937_64 rng(seed);
  std::filesystem::create_directories(crash_dir);
  const std::string current = crash_dir + "/" + target.name + "-current-input";
  save_input_on_fatal_signals(current);
  // The watchdog: an input still running after hang_ms is a hang; its abort saves the input.
  std::atomic<std::int64_t> started_ns{-1};
  std::atomic<bool> stop{false};
  auto now_ns = [] {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
  };
  std::thread watchdog([&] {
    while (!stop.load()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      const std::int64_t t = started_ns.load();
      if (t >= 0 && (now_ns() - t) / 1e6 > hang_ms) {
        std::fprintf(stderr, "FUZZ FINDING: %s: an input ran longer than %.0f ms (a hang); it is %s\n", target.name,
                     hang_ms, current.c_str());
        std::abort();
      }
    }
  });
  RunStats st;
  const auto t0 = std::chrono::steady_clock::now();
  const std::uint64_t total = corpus.size() + (corpus.empty() ? 0 : runs);
  for (std::uint64_t i = 0; i < total; ++i) {
    std::string input;
    if (i < corpus.size()) {
      input = corpus[i];
    } else {
      input = mutate(corpus[rng() % corpus.size()], corpus[rng() % corpus.size()], rng);
      if (rng() % 4 == 0) input = mutate(input, corpus[rng() % corpus.size()], rng);  // deeper edits
    }
    g_input.store(&input);  // a crash or hang leaves the input that caused it in `current`
    const std::int64_t t = now_ns();
    started_ns.store(t);
    target.run(reinterpret_cast<const std::uint8_t*>(input.data()), input.size());
    started_ns.store(-1);
    g_input.store(nullptr);
    st.slowest_ms = std::max(st.slowest_ms, (now_ns() - t) / 1e6);
    ++st.inputs;
  }
  stop.store(true);
  watchdog.join();
  st.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return st;
}

}  // namespace cais::fuzz
