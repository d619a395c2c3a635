// The short fuzz run of the test suite: a few hundred seeded mutations of each target's seed
// corpus through the same entry points as libFuzzer. A crash, hang (watchdog) or unclear
// rejection aborts the test binary, naming the input it saved under the crash folder.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "cais/errors.h"
#include "cais/fuzz/mutator.h"
#include "cais/net/booksim_config.h"

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

}  // namespace
}  // namespace cais::fuzz
