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

// A false finding of the long booksim run: the key "topstology" contains "stol".
TEST(FuzzCheck, LibraryMessagesAreMatchedAsWholeWords) {
  EXPECT_TRUE(is_library_message("stoi"));
  EXPECT_TRUE(is_library_message("vector::_M_range_check: __n (which is 9) >= this->size() (which is 8)"));
  EXPECT_TRUE(is_library_message("std::bad_alloc"));
  EXPECT_FALSE(is_library_message("topstology: fuzz.cfg:3: unknown configuration key"));
  EXPECT_FALSE(is_library_message("gpu.stoichiometry: unknown parameter"));
}

TEST(FuzzFindings, QuoteEscapesEveryByteThatIsNotPrintable) {
  EXPECT_EQ(quote("gpu.sm_count"), "'gpu.sm_count'");
  EXPECT_EQ(quote(std::string("a\nb\r\t\\\x1b\x7f\0\xc3", 10)), "'a\\nb\\r\\t\\\\\\x1b\\x7f\\x00\\xc3'");
}

std::string serialized(const proto::Control& c) {
  std::string bytes;
  c.SerializeToString(&bytes);
  return bytes;
}

// The Error an engine answers `configure` (and one window of simulation) with: the last message
// it sent, or "(no Error)".
std::string engine_error(const proto::Control& configure) {
  proto::Control advance, bye;
  advance.mutable_advance()->set_until_ps(configure.configure().window_ps());
  bye.mutable_shutdown();
  MemoryLink link({{serialized(configure)}, {serialized(advance)}, {serialized(bye)}});
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

// The recorded Configure of the traffic run's GPU engine (it hosts GPUs 0..7).
proto::Control traffic_gpu_configure() {
  proto::Control cfg;
  for (const std::string& bytes : load_corpus(corpus_root() + "/packet_batch_configure"))
    if (cfg.ParseFromString(bytes) && cfg.configure().engine_name() == "gpu_engine0" &&
        cfg.configure().params().at("host.gpu_model").s() == "traffic")
      return cfg;
  ADD_FAILURE() << "no traffic GPU engine Configure among the seeds";
  return cfg;
}

// The last message an engine hosting `configure` sends after one Advance that lists engine 1's
// batch in a peer ring (`direct`: a transport with peer rings).
std::string answer_to_peer_batch(const proto::Control& configure, MemoryLink::Frames batch, bool direct = true) {
  proto::Control advance, bye;
  advance.mutable_advance()->set_until_ps(2 * configure.configure().window_ps());
  advance.mutable_advance()->add_batch_src(1);
  bye.mutable_shutdown();
  MemoryLink link({{serialized(configure)}, {serialized(advance)}, {serialized(bye)}}, {{1, {std::move(batch)}}},
                  direct);
  run_engine_host(link, "fuzz", FaultInjection{});
  proto::Control last;
  if (link.sent().empty() || !last.ParseFromString(link.sent().back())) return "(nothing)";
  return last.has_error() ? last.error().message() : "(no Error)";
}

// A batch in a peer ring is a PacketBatch header (no records in it) and the records: anything
// else is refused in one line that names the sending engine or what is wrong with a record.
TEST(PeerBatches, AMalformedBatchIsRefusedInOneLine) {
  const proto::Control cfg = traffic_gpu_configure();
  proto::PacketBatch head;
  head.set_src_engine(1);
  head.set_dst_engine(cfg.configure().engine_index());
  EXPECT_EQ(answer_to_peer_batch(cfg, {head.SerializeAsString(), ""}), "(no Error)");  // an empty batch
  const std::string from1 = "malformed packet batch from engine 1";
  EXPECT_EQ(answer_to_peer_batch(cfg, {head.SerializeAsString()}), from1);  // one frame
  EXPECT_EQ(answer_to_peer_batch(cfg, {head.SerializeAsString(), "", ""}), from1);
  EXPECT_EQ(answer_to_peer_batch(cfg, {"\xff\xff", ""}), from1);  // not a PacketBatch
  proto::PacketBatch wrong = head;
  wrong.set_src_engine(2);
  EXPECT_EQ(answer_to_peer_batch(cfg, {wrong.SerializeAsString(), ""}), from1);
  wrong = head;
  wrong.set_dst_engine(head.dst_engine() + 1);
  EXPECT_EQ(answer_to_peer_batch(cfg, {wrong.SerializeAsString(), ""}), from1);
  wrong = head;
  wrong.set_records("x");
  EXPECT_EQ(answer_to_peer_batch(cfg, {wrong.SerializeAsString(), ""}), from1);  // records in the header
  head.set_packets(1);
  EXPECT_NE(answer_to_peer_batch(cfg, {head.SerializeAsString(), std::string(40, '\0')}).find("is cut short"),
            std::string::npos);
  EXPECT_EQ(answer_to_peer_batch(cfg, {head.SerializeAsString(), ""}),
            "packet batch: 1 packets announced, 0 present");
  EXPECT_EQ(answer_to_peer_batch(cfg, {head.SerializeAsString(), ""}, false),
            "this transport carries packet batches through the harness only");
}

// Found by fuzzing (engine_host, SIGFPE): a traffic GPU whose links were all removed hashed its
// requests over zero ports (a division by zero).
TEST(FuzzFindings, TrafficGpuWithoutLinksIsRefused) {
  proto::Control cfg = traffic_gpu_configure();
  auto* links = cfg.mutable_configure()->mutable_topology()->mutable_links();
  for (int i = links->size() - 1; i >= 0; --i)
    if (links->Get(i).src_node() == 2 || links->Get(i).dst_node() == 2) links->DeleteSubrange(i, 1);
  EXPECT_EQ(engine_error(cfg).rfind("topology: gpu2 has no connected NVLink port but traffic.requests_per_gpu is ", 0), 0u)
      << engine_error(cfg);
}

// Found by fuzzing (engine_host): a hosted node past the topology reached the user as
// vector::_M_range_check.
TEST(FuzzFindings, HostedNodeOutsideTheTopologyIsRefused) {
  proto::Control cfg = traffic_gpu_configure();
  cfg.mutable_configure()->add_hosted_nodes(45);
  EXPECT_EQ(engine_error(cfg), "hosted_nodes: node 45 is not in the topology (it has 9 nodes)");
  cfg = traffic_gpu_configure();
  cfg.mutable_configure()->add_hosted_nodes(3);
  EXPECT_EQ(engine_error(cfg), "hosted_nodes: node 3 is listed twice");
}

// Found by fuzzing (engine_host): a node name holding a control character reached errors raw.
TEST(FuzzFindings, NodeNameWithAControlCharacterIsRefused) {
  proto::Control cfg = traffic_gpu_configure();
  cfg.mutable_configure()->mutable_topology()->mutable_nodes(1)->set_name("gpu1 \x01");
  EXPECT_EQ(engine_error(cfg),
            "topology.nodes: node 1 has the name 'gpu1 \\x01'; allowed: printable characters without spaces");
}

// Found by fuzzing (engine_host, SIGFPE): net.stats_bin_ns of 1e-9 rounds to a bin of 0 ps; a
// negative time would not fit the unsigned picoseconds at all.
TEST(FuzzFindings, TimesThatRoundToZeroOrAreNegativeAreRefused) {
  Params p;
  proto::ParamValue v;
  v.set_d(1e-9);
  p.set("net.stats_bin_ns", v);
  EXPECT_THROW(p.get_time_ps("net.stats_bin_ns", 1), ConfigError);
  EXPECT_EQ(p.get_time_ps("net.stats_bin_ns"), 0u);
  v.set_d(-1);
  p.set("traffic.issue_gap_ns", v);
  try {
    p.get_time_ps("traffic.issue_gap_ns");
    FAIL() << "a negative time was accepted";
  } catch (const ConfigError& e) {
    EXPECT_STREQ(e.what(), "traffic.issue_gap_ns: must be a time in ns from 0 to 1e+12, got -1");
  }
  proto::Control cfg = traffic_gpu_configure();
  (*cfg.mutable_configure()->mutable_params())["traffic.issue_gap_ns"].set_d(-5);
  EXPECT_EQ(engine_error(cfg), "traffic.issue_gap_ns: must be a time in ns from 0 to 1e+12, got -5");
}

// Found by fuzzing (engine_host, a hang): a link of 8.9e-14 GB/s took ~1e18 ps per packet and
// the switch filled its busy-time bins one by one.
TEST(FuzzFindings, LinkBandwidthAndLatencyAreBounded) {
  proto::Control cfg = traffic_gpu_configure();
  cfg.mutable_configure()->mutable_topology()->mutable_links(0)->set_bw_gbps(8.8817841970012523e-14);
  EXPECT_EQ(engine_error(cfg).rfind("topology.links: bandwidth must be 0.001 to 1e+06 GB/s on ", 0), 0u) << engine_error(cfg);
  cfg = traffic_gpu_configure();
  cfg.mutable_configure()->mutable_topology()->mutable_links(0)->set_latency_ps(1ull << 62);
  EXPECT_EQ(engine_error(cfg).rfind("topology.links: latency must be <= 1000000000000 ps on ", 0), 0u) << engine_error(cfg);
}

// Found by fuzzing (booksim, a hang): k = 66666668 built 66 M terminals.
TEST(FuzzFindings, BooksimTerminalsAndVcsAreBounded) {
  const auto seeds = load_corpus(corpus_root() + "/booksim");
  ASSERT_FALSE(seeds.empty());
  for (const auto& [line, error] : std::vector<std::pair<std::string, std::string>>{
           {"k = 66666668;", "k: must be <= 1024, got 66666668"}, {"num_vcs = 100000;", "num_vcs: must be <= 64, got 100000"}}) {
    try {
      net::BooksimConfig::from_string(seeds.front() + "\n" + line + "\n", "net.cfg").to_configure();
      ADD_FAILURE() << line << " was accepted";
    } catch (const ConfigError& e) {
      EXPECT_EQ(std::string(e.what()), error);
    }
  }
}

// Found by fuzzing (engine_host, SIGSEGV): a link whose dst_port is past the peer's ports made
// the peer index its input buffers out of bounds when a packet arrived.
TEST(FuzzFindings, LinkWithoutItsReverseIsRefused) {
  proto::Control cfg = traffic_gpu_configure();
  cfg.mutable_configure()->mutable_topology()->mutable_links(0)->set_dst_port(200);
  EXPECT_NE(engine_error(cfg).find("has no link back on that port"), std::string::npos) << engine_error(cfg);
}

TEST(FuzzFindings, ZeroFlitBytesIsRefusedByTheGpuEngine) {
  proto::Control cfg = traffic_gpu_configure();
  (*cfg.mutable_configure()->mutable_params())["net.flit_bytes"].set_i(0);
  EXPECT_EQ(engine_error(cfg), "net.flit_bytes: must be >= 1");
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
