// Fuzz targets: each feeds arbitrary bytes into the exact function an engine uses to decode its
// input, and aborts (a finding) on anything but a clean, one-line rejection. The same targets
// run under libFuzzer (CAIS_FUZZ=ON, clang) and under the seeded mutator of cais/fuzz/mutator.h
// (every build: the short run of the test suite, and cais-fuzz for long runs without clang).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace cais::fuzz {

using TargetFn = int (*)(const std::uint8_t* data, std::size_t size);

struct Target {
  const char* name;    // also the corpus folder under tests/data/fuzz
  TargetFn run;
  const char* what;
};

// The control protocol: a sequence of messages (see split_messages) into run_engine_host over an
// in-memory EngineLink; the engine must answer or refuse with an Error, never crash.
int engine_host(const std::uint8_t* data, std::size_t size);
// Packet batches: a recorded Configure (the first byte picks one of packet_batch_configure, by
// file name), then windows of batch frames in the split_messages encoding, one Advance each.
int packet_batch(const std::uint8_t* data, std::size_t size);
// A serialized isa.Workload into gpu::Workload::parse.
int workload(const std::uint8_t* data, std::size_t size);
// A BookSim config file into net::BooksimConfig::from_string and to_configure.
int booksim(const std::uint8_t* data, std::size_t size);

const std::vector<Target>& all_targets();
const Target* find_target(const std::string& name);

// Folder holding the seed corpora (tests/data/fuzz of the source tree, or CAIS_FUZZ_CORPUS).
std::string corpus_root();

// Input encoding of the engine-host targets: messages back to back, each a frame count (1 byte)
// then that many frames of (4-byte little-endian length, bytes). A truncated tail is dropped.
std::vector<std::vector<std::string>> split_messages(const std::uint8_t* data, std::size_t size);
std::string join_messages(const std::vector<std::vector<std::string>>& messages);

// Whether `m` is what the C++ standard library says when code indexes past an end or parses a
// bad number (vector::_M_range_check, stoi, ...): a user must never see it, since it names no
// key, field or row. Matches whole words only.
bool is_library_message(const std::string& m);

// Aborts with `what` on stderr: the finding a fuzzer records.
[[noreturn]] void finding(const std::string& what);
// Discards what the engines write to std::cerr (each rejection is a line there).
void quiet_engine_output();

}  // namespace cais::fuzz
