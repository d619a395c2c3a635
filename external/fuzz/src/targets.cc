#include "cais/fuzz/targets.h"

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>

#include "cais/engine_host.h"
#include "cais/errors.h"
#include "cais/fuzz/mutator.h"
#include "cais/gpu/workload.h"
#include "cais/net/booksim_config.h"
#include "cosim.pb.h"
#include "google/protobuf/stubs/logging.h"
#include "memory_link.h"

namespace cais::fuzz {

void finding(const std::string& what) {
  std::fprintf(stderr, "FUZZ FINDING: %s\n", what.c_str());  // std::cerr may be silenced
  std::abort();
}

void quiet_engine_output() {
  static std::ostringstream sink;  // the engines' per-rejection lines would flood a long run
  std::cerr.rdbuf(sink.rdbuf());
  sink.setstate(std::ios::badbit);
  google::protobuf::SetLogHandler(nullptr);  // "invalid UTF-8 in a string field": one per input
}

std::string corpus_root() {
  if (const char* env = std::getenv("CAIS_FUZZ_CORPUS")) return env;
  return CAIS_FUZZ_CORPUS_DIR;  // tests/data/fuzz of the source tree (set by CMake)
}

std::vector<std::vector<std::string>> split_messages(const std::uint8_t* data, std::size_t size) {
  std::vector<std::vector<std::string>> out;
  std::size_t pos = 0;
  while (pos < size) {
    const std::size_t frames = data[pos++];
    std::vector<std::string> msg;
    for (std::size_t i = 0; i < frames; ++i) {
      if (size - pos < 4) return out;
      const std::size_t len = data[pos] | data[pos + 1] << 8 | data[pos + 2] << 16 | std::size_t(data[pos + 3]) << 24;
      pos += 4;
      if (size - pos < len) return out;
      msg.emplace_back(reinterpret_cast<const char*>(data + pos), len);
      pos += len;
    }
    out.push_back(std::move(msg));
  }
  return out;
}

std::string join_messages(const std::vector<std::vector<std::string>>& messages) {
  std::string out;
  for (const auto& m : messages) {
    out.push_back(static_cast<char>(m.size()));
    for (const auto& f : m) {
      const std::uint32_t n = static_cast<std::uint32_t>(f.size());
      for (int b = 0; b < 4; ++b) out.push_back(static_cast<char>(n >> (8 * b)));
      out += f;
    }
  }
  return out;
}

namespace {

}  // namespace

bool is_library_message(const std::string& m) {
  auto word_char = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  for (const char* s : {"_M_", "vector::", "basic_string", "map::at", "stoi", "stol", "stoul", "stod",
                        "bad_alloc", "bad_array_new_length", "bad_optional", "bad_variant", "bad_function_call"}) {
    const std::string w = s;
    for (auto at = m.find(w); at != std::string::npos; at = m.find(w, at + 1)) {
      const bool starts = at == 0 || !word_char(m[at - 1]) || w.front() == '_';
      const bool ends = at + w.size() == m.size() || !word_char(m[at + w.size()]) || w.back() == ':' || w.back() == '_';
      if (starts && ends) return true;  // whole words: a key like "topstology" is not "stol"
    }
  }
  return false;
}

namespace {

void check_message(const std::string& where, const std::string& m) {
  if (m.empty()) finding(where + ": a rejection with an empty message");
  if (m.find('\n') != std::string::npos) finding(where + ": a rejection of several lines: " + m);
  // A raw control character (a name quoted without escapes) breaks or garbles the user's line.
  for (const char c : m)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f)
      finding(where + ": a control character in a rejection: " + quote(m));
  if (is_library_message(m)) finding(where + ": a library error reached the user: " + m);
}

// Runs the engine's protocol loop on `messages` (and batches waiting in peer rings, if `direct`);
// checks that its last word, if an Error, is clear.
void run_host(std::vector<std::vector<std::string>> messages,
              std::map<std::uint32_t, std::deque<MemoryLink::Frames>> peer = {}, bool direct = false) {
  MemoryLink link(std::move(messages), std::move(peer), direct);
  const int rc = run_engine_host(link, "fuzz", FaultInjection{});
  if (rc == 0 || rc == 3) return;  // shut down, or ran out of messages
  proto::Control last;
  if (link.sent().empty() || !last.ParseFromString(link.sent().back()) || !last.has_error())
    finding("exit code " + std::to_string(rc) + " without an Error message");
  check_message("engine", last.error().message());
}

std::string serialize(const proto::Control& c) {
  std::string s;
  c.SerializeToString(&s);
  return s;
}

// The recorded Configure messages of packet_batch (sorted by file name: the first input byte picks one).
const std::vector<proto::Control>& batch_configures() {
  static const std::vector<proto::Control> configs = [] {
    std::vector<proto::Control> out;
    for (const std::string& bytes : load_corpus(corpus_root() + "/packet_batch_configure")) {
      out.emplace_back();
      if (!out.back().ParseFromString(bytes) || !out.back().has_configure())
        finding("a file of packet_batch_configure is not a Control with a Configure");
    }
    if (out.empty()) finding("no Configure seeds in " + corpus_root() + "/packet_batch_configure");
    return out;
  }();
  return configs;
}

}  // namespace

int engine_host(const std::uint8_t* data, std::size_t size) {
  run_host(split_messages(data, size));
  return 0;
}

// The first byte picks a Configure (low 7 bits) and how batches arrive (high bit): as frames of
// the Advance, or waiting in peer rings (each batch split into its header and its records, as
// an engine writes them there).
int packet_batch(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const proto::Control& cfg = batch_configures()[(data[0] & 0x7f) % batch_configures().size()];
  const bool direct = data[0] & 0x80;
  const std::uint64_t window = cfg.configure().window_ps();
  std::vector<std::vector<std::string>> messages{{serialize(cfg)}};
  std::map<std::uint32_t, std::deque<MemoryLink::Frames>> peer;
  std::uint64_t until = 0;
  auto windows = split_messages(data + 1, size - 1);
  if (windows.size() > 16) windows.resize(16);
  for (auto& batches : windows) {
    until += window;
    proto::Control adv;
    adv.mutable_advance()->set_until_ps(until);
    if (direct) {
      for (auto& b : batches) {
        proto::PacketBatch head;
        const bool parsed = head.ParseFromString(b);
        std::string records = parsed ? head.records() : b;
        head.clear_records();
        adv.mutable_advance()->add_batch_src(head.src_engine());
        peer[head.src_engine()].push_back({head.SerializeAsString(), std::move(records)});
      }
      batches.clear();
    }
    adv.mutable_advance()->set_num_batches(static_cast<std::uint32_t>(batches.size()));
    batches.insert(batches.begin(), serialize(adv));
    messages.push_back(std::move(batches));
  }
  proto::Control stats, bye;
  stats.mutable_get_stats()->set_end_ps(until);
  bye.mutable_shutdown();
  messages.push_back({serialize(stats)});
  messages.push_back({serialize(bye)});
  run_host(std::move(messages), std::move(peer), direct);
  return 0;
}

int workload(const std::uint8_t* data, std::size_t size) {
  try {
    gpu::Workload::parse(std::string(reinterpret_cast<const char*>(data), size), 8);
  } catch (const ConfigError& e) {
    check_message("workload", e.what());
  }
  return 0;
}

int booksim(const std::uint8_t* data, std::size_t size) {
  try {
    auto cfg = net::BooksimConfig::from_string(std::string(reinterpret_cast<const char*>(data), size), "fuzz.cfg");
    cfg.traffic();
    cfg.offered_flits();
    cfg.to_configure();
  } catch (const ConfigError& e) {
    check_message("booksim", e.what());
  }
  return 0;
}

const std::vector<Target>& all_targets() {
  static const std::vector<Target> targets{
      {"engine_host", engine_host, "control messages into run_engine_host"},
      {"packet_batch", packet_batch, "packet batches into a configured engine"},
      {"workload", workload, "isa.Workload bytes into gpu::Workload::parse"},
      {"booksim", booksim, "BookSim config text into net::BooksimConfig"},
  };
  return targets;
}

const Target* find_target(const std::string& name) {
  for (const auto& t : all_targets())
    if (name == t.name) return &t;
  return nullptr;
}

}  // namespace cais::fuzz
