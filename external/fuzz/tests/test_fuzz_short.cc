// The short fuzz run of the test suite: a few hundred seeded mutations of each target's seed
// corpus through the same entry points as libFuzzer. A crash, hang (watchdog) or unclear
// rejection aborts the test binary, naming the input it saved under the crash folder.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "cais/engine_host.h"
#include "cais/errors.h"
#include "cais/fuzz/mutator.h"
#include "cais/gpu/workload.h"
#include "cais/net/booksim_config.h"
#include "cais/params.h"
#include "cais/quote.h"
#include "cosim.pb.h"
#include "isa.pb.h"
#include "memory_link.h"

namespace cais::fuzz {
namespace {

std::uint64_t short_runs() {
  const char* env = std::getenv("CAIS_FUZZ_SHORT_RUNS");
  return env ? std::strtoull(env, nullptr, 10) : 500;
}

class FuzzShort : public ::testing::TestWithParam<const char*> {};

TEST_P(FuzzShort, SeededMutationsAreAnsweredOrRefusedCleanly) {
  const Target* t = find_target(GetParam());
  ASSERT_NE(t, nullptr);
  const auto corpus = load_corpus(corpus_root() + "/" + t->name);
  ASSERT_FALSE(corpus.empty()) << "no seeds in " << corpus_root() << "/" << t->name;
  quiet_engine_output();
  const auto dir = (std::filesystem::temp_directory_path() / "cais-fuzz-findings").string();
  const auto st = run_mutations(*t, corpus, short_runs(), 1, 5000, dir);
  EXPECT_EQ(st.inputs, corpus.size() + short_runs());
}

INSTANTIATE_TEST_SUITE_P(Targets, FuzzShort, ::testing::Values("engine_host", "packet_batch", "workload", "booksim"));

TEST(FuzzFraming, SplitInvertsJoin) {
  const std::vector<std::vector<std::string>> m{{"ctl", std::string(300, 'x')}, {}, {std::string("\0a", 2)}};
  const std::string bytes = join_messages(m);
  EXPECT_EQ(split_messages(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size()), m);
}

// Found by fuzzing: a NUL byte ended up in the key an error quotes first, so the message the
// user saw was empty.
TEST(FuzzFindings, BooksimControlCharacterIsNamedWithItsLine) {
  try {
    net::BooksimConfig::from_string(std::string("k = 8;\n\0\0topology = fly;\n", 24), "net.cfg");
    FAIL() << "a NUL byte was accepted";
  } catch (const ConfigError& e) {
    EXPECT_STREQ(e.what(), "net.cfg:2: control character 0x00; allowed: text (tabs, spaces, printable characters)");
  }
}

TEST(FuzzFindings, QuoteEscapesEveryByteThatIsNotPrintable) {
  EXPECT_EQ(quote("gpu.sm_count"), "'gpu.sm_count'");
  EXPECT_EQ(quote(std::string("a\nb\r\t\\\x1b\x7f\0\xc3", 10)), "'a\\nb\\r\\t\\\\\\x1b\\x7f\\x00\\xc3'");
}

// The Error an engine answers `configure` with (the last message it sent).
std::string engine_error(const proto::Control& configure) {
  std::string bytes;
  configure.SerializeToString(&bytes);
  proto::Control bye;
  bye.mutable_shutdown();
  std::string bye_bytes;
  bye.SerializeToString(&bye_bytes);
  MemoryLink link({{bytes}, {bye_bytes}});
  run_engine_host(link, "fuzz", FaultInjection{});
  proto::Control last;
  if (link.sent().empty() || !last.ParseFromString(link.sent().back()) || !last.has_error()) return "(no Error)";
  return last.error().message();
}

// The seeds must pass the engine's Configure checks, or every mutation of packet_batch stops at
// the Configure (as it did when the engines began to require gpu.bulk_lines): re-record them
// with scripts/fuzz_seeds.py when this fails.
TEST(FuzzSeeds, RecordedConfiguresAreAccepted) {
  for (const std::string& bytes : load_corpus(corpus_root() + "/packet_batch_configure")) {
    proto::Control cfg;
    ASSERT_TRUE(cfg.ParseFromString(bytes));
    EXPECT_EQ(engine_error(cfg), "(no Error)") << cfg.configure().engine_name();
  }
}

// Found by fuzzing: a parameter key holding a newline was quoted raw, so the engine's one-line
// error became two lines.
TEST(FuzzFindings, ParameterKeyWithANewlineIsEscapedInTheError) {
  const auto seeds = load_corpus(corpus_root() + "/packet_batch_configure");
  ASSERT_FALSE(seeds.empty());
  proto::Control cfg;
  ASSERT_TRUE(cfg.ParseFromString(seeds.front()));
  for (const char* key : {"gpu.bogus\nkey", "net.bogus\nkey"})  // one of them is under this engine's prefixes
    (*cfg.mutable_configure()->mutable_params())[key].set_i(1);
  const std::string m = engine_error(cfg);
  EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  EXPECT_NE(m.find(".bogus\\nkey: unknown parameter"), std::string::npos) << m;
}

TEST(FuzzFindings, ParameterValueOfAnEnumIsEscapedInTheError) {
  proto::ParamValue v;
  v.set_s("ring\x1b[2J");
  Params p;
  p.set("collective.algo", v);
  try {
    p.get_enum("collective.algo", {"ring", "nvls"});
    FAIL() << "an unknown value was accepted";
  } catch (const ConfigError& e) {
    EXPECT_STREQ(e.what(), "collective.algo: 'ring\\x1b[2J' is not one of: ring, nvls");
  }
}

// Found by fuzzing: a workload name holding a newline was quoted raw.
TEST(FuzzFindings, WorkloadNameWithANewlineIsEscapedInTheError) {
  isa::Workload wl;
  wl.set_name("layer\nnext");
  wl.set_num_gpus(16);
  wl.add_launches();
  std::string bytes;
  wl.SerializeToString(&bytes);
  try {
    gpu::Workload::parse(bytes, 8);
    FAIL() << "a 16-GPU workload was accepted on 8 GPUs";
  } catch (const ConfigError& e) {
    EXPECT_STREQ(e.what(), "workload: workload 'layer\\nnext' needs 16 GPUs, the system has 8");
  }
}

}  // namespace
}  // namespace cais::fuzz
