// The shared-memory channel: framing, wrap-around, streaming of messages larger than the ring,
// garbage detection, and ordering under a concurrent producer (another process).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <random>
#include <string>
#include <vector>

#include "cais/shm_channel.h"

namespace cais::shm {
namespace {

constexpr std::int64_t kSecond = 1'000'000'000;

std::vector<std::string> copy(const std::vector<FrameView>& frames) {
  std::vector<std::string> out;
  for (const auto& f : frames) out.emplace_back(f.data, f.size);
  return out;
}

std::vector<FrameView> views(const std::vector<std::string>& frames) {
  std::vector<FrameView> out;
  for (const auto& f : frames) out.push_back({f.data(), f.size()});
  return out;
}

// A harness hub and an engine endpoint in one process (the fd is duplicated as a child would inherit it).
struct Pair {
  explicit Pair(std::uint64_t ring) : hub(1, ring), engine(dup(hub.fd()), 0) {}
  HarnessHub hub;
  EngineEndpoint engine;
};

TEST(ShmChannel, RoundTripKeepsFramesAndEmptyFrames) {
  Pair p(4096);
  const std::vector<std::string> msg = {"control", "", std::string(13, 'x'), "batch"};
  auto v = views(msg);
  p.hub.send(0, v.data(), v.size());
  ASSERT_EQ(p.engine.wait(0, kSecond), RingReader::kReady);
  EXPECT_EQ(copy(p.engine.frames()), msg);
  p.engine.send(v.data(), 1);
  std::uint32_t from = 99;
  ASSERT_EQ(p.hub.wait_any(0, kSecond, &from), RingReader::kReady);
  EXPECT_EQ(from, 0u);
  EXPECT_EQ(copy(p.hub.reader(0).frames()), std::vector<std::string>{"control"});
}

TEST(ShmChannel, NothingWaitingTimesOut) {
  Pair p(4096);
  std::uint32_t from;
  EXPECT_EQ(p.hub.wait_any(1000, 2'000'000, &from), RingReader::kNothing);
  EXPECT_EQ(p.engine.wait(0, 1'000'000), RingReader::kNothing);
}

TEST(ShmChannel, WrapsAroundTheRingManyTimes) {
  Pair p(4096);
  std::mt19937 rng(3);
  for (int i = 0; i < 2000; ++i) {
    std::vector<std::string> msg = {std::to_string(i), std::string(rng() % 700, static_cast<char>('a' + i % 26))};
    auto v = views(msg);
    p.hub.send(0, v.data(), v.size());
    ASSERT_EQ(p.engine.wait(0, kSecond), RingReader::kReady);
    ASSERT_EQ(copy(p.engine.frames()), msg);
  }
}

TEST(ShmChannel, StreamsMessagesLargerThanTheRing) {
  Pair p(4096);
  std::string big(1 << 20, '\0');
  std::mt19937 rng(5);
  for (auto& c : big) c = static_cast<char>(rng());
  const std::vector<std::string> msg = {"head", big, "tail"};
  auto v = views(msg);
  p.hub.send(0, v.data(), v.size());  // does not block: the rest waits in the backlog
  p.hub.send(0, v.data(), 1);         // queued behind it, in order
  std::uint32_t from;
  // The engine's waits pull what is there; the hub's waits push the backlog.
  int rounds = 0;
  RingReader::Status st;
  while ((st = p.engine.wait(0, 0)) == RingReader::kNothing) {
    ASSERT_EQ(p.hub.wait_any(0, 0, &from), RingReader::kNothing);
    ASSERT_LT(++rounds, 100000);
  }
  ASSERT_EQ(st, RingReader::kReady);
  EXPECT_EQ(copy(p.engine.frames()), msg);
  EXPECT_GT(rounds, 200);  // it really was streamed
  while ((st = p.engine.wait(0, 0)) == RingReader::kNothing) p.hub.wait_any(0, 0, &from);
  EXPECT_EQ(copy(p.engine.frames()), std::vector<std::string>{"head"});
}

TEST(ShmChannel, GarbageIsDetected) {
  Pair p(4096);
  std::string junk(64, '\0');
  std::mt19937 g(7);
  for (auto& ch : junk) ch = static_cast<char>(g());
  p.engine.send_raw(junk.data(), junk.size());
  std::uint32_t from;
  ASSERT_EQ(p.hub.wait_any(0, kSecond, &from), RingReader::kBad);
  EXPECT_NE(p.hub.reader(0).error().find("bad frame header"), std::string::npos);
  EXPECT_EQ(p.hub.wait_any(0, 0, &from), RingReader::kBad);  // the channel stays broken
}

TEST(ShmChannel, AttachRejectsWhatIsNotASegment) {
  Pair p(4096);
  EXPECT_THROW(EngineEndpoint(dup(p.hub.fd()), 1), std::runtime_error);  // slot out of range
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  EXPECT_THROW(Segment::attach(fds[0]), std::exception);
  close(fds[1]);
}

// The echoing child of a ping-pong: `rounds` times it waits for a message (spinning on odd
// rounds, asleep at once on even ones) and answers "i:<its first frame>", then drains. Exit
// code: 0, 1 (a wait failed) or 2 (its answers did not leave).
template <class Wait, class Frames, class Send>
int echo_rounds(EngineEndpoint& ep, int rounds, Wait wait, Frames frames, Send send) {
  for (int i = 0; i < rounds; ++i) {
    if (wait(i % 2 ? 50'000 : 0) != RingReader::kReady) return 1;
    const std::vector<FrameView>& f = frames();
    std::string back = std::to_string(i) + ":" + std::string(f[0].data, f[0].size);
    FrameView v{back.data(), back.size()};
    send(v);
  }
  return ep.drain(10 * kSecond) ? 0 : 2;
}

// A ping-pong with another process: the engine echoes every message with its sequence number;
// the hub checks order and contents, with both sides sleeping at times (no spinning), and with
// messages of every size crossing the ring's end.
TEST(ShmChannel, PingPongWithAnotherProcess) {
  HarnessHub hub(2, 8192);
  const int rounds = 3000;
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    _exit([&] {
      EngineEndpoint ep(dup(hub.fd()), 1);
      return echo_rounds(
          ep, rounds, [&](std::int64_t spin) { return ep.wait(spin, 10 * kSecond); },
          [&]() -> const std::vector<FrameView>& { return ep.frames(); }, [&](FrameView v) { ep.send(&v, 1); });
    }());
  }
  std::mt19937 rng(11);
  for (int i = 0; i < rounds; ++i) {
    std::string body(rng() % 9000, static_cast<char>('A' + i % 26));
    FrameView v{body.data(), body.size()};
    hub.send(1, &v, 1);
    std::uint32_t from = 0;
    RingReader::Status st;
    while ((st = hub.wait_any(i % 3 ? 20'000 : 0, 10 * kSecond, &from)) == RingReader::kNothing) {}
    ASSERT_EQ(st, RingReader::kReady);
    ASSERT_EQ(from, 1u);
    const auto& f = hub.reader(1).frames();
    ASSERT_EQ(f.size(), 1u);
    ASSERT_EQ(std::string(f[0].data, f[0].size), std::to_string(i) + ":" + body);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

// A message sent without a wake-up reaches a sleeping engine only with the wake that follows
// (the harness queues a window's Advances first, then wakes the sleepers).
TEST(ShmChannel, ASleepingEngineWakesOnlyWhenWoken) {
  HarnessHub hub(1, 4096);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    EngineEndpoint ep(dup(hub.fd()), 0);
    const auto t0 = std::chrono::steady_clock::now();
    const bool got = ep.wait(0, 5 * kSecond) == RingReader::kReady;  // no spinning: asleep at once
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
    _exit(!got ? 1 : ms.count() < 250 ? 2 : ms.count() > 4000 ? 3 : 0);
  }
  usleep(100'000);  // the engine is asleep by now
  const std::string advance = "advance";
  FrameView v{advance.data(), advance.size()};
  hub.send(0, &v, 1, false);
  usleep(200'000);  // published, not woken: it sleeps on
  hub.wake(0);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "exit " << WEXITSTATUS(status) << " (2: woken before the wake, 3: never woken)";
}

std::string random_bytes(std::size_t n, unsigned seed) {
  std::string s(n, '\0');
  std::mt19937 rng(seed);
  for (auto& c : s) c = static_cast<char>(rng());
  return s;
}

TEST(ShmPeerRings, OnlyASegmentWithPeerRingsHasThem) {
  HarnessHub plain(2, 4096);
  EXPECT_FALSE(EngineEndpoint(dup(plain.fd()), 0).has_peers());
  HarnessHub hub(3, 4096, 8192);
  EngineEndpoint a(dup(hub.fd()), 0);
  ASSERT_TRUE(a.has_peers());
  const std::string x = "x";
  FrameView v{x.data(), x.size()};
  EXPECT_THROW(a.send_peer(0, &v, 1), std::runtime_error);  // no ring to itself
  EXPECT_THROW(a.send_peer(3, &v, 1), std::runtime_error);
}

// Two engines that each send the other a batch 16x their ring, then wait for the other's: each
// wait pushes its own backlog while it pulls, so neither blocks the other. The third engine's
// rings are separate: what goes to it stays apart, in order.
TEST(ShmPeerRings, BatchesLargerThanTheRingCrossBothWaysWhileBothWait) {
  HarnessHub hub(3, 4096, 8192);
  EngineEndpoint a(dup(hub.fd()), 0), b(dup(hub.fd()), 1), c(dup(hub.fd()), 2);
  const std::vector<std::string> to_b = {"header a->b", random_bytes(1 << 17, 1)};
  const std::vector<std::string> to_a = {"header b->a", random_bytes(1 << 17, 2)};
  const std::vector<std::string> to_c1 = {"first", "a->c"}, to_c2 = {"second", random_bytes(100, 3)};
  auto vb = views(to_b), va = views(to_a), vc1 = views(to_c1), vc2 = views(to_c2);
  a.send_peer(1, vb.data(), vb.size());  // never blocks: the rest waits in a's backlog
  a.send_peer(2, vc1.data(), vc1.size());
  b.send_peer(0, va.data(), va.size());
  a.send_peer(2, vc2.data(), vc2.size());
  RingReader::Status sa = RingReader::kNothing, sb = RingReader::kNothing;
  int rounds = 0;
  while (sa != RingReader::kReady || sb != RingReader::kReady) {  // one thread takes turns for both
    if (sa != RingReader::kReady) sa = a.wait_peer(1, 0, 0);
    if (sb != RingReader::kReady) sb = b.wait_peer(0, 0, 0);
    ASSERT_NE(sa, RingReader::kBad) << a.peer_error(1);
    ASSERT_NE(sb, RingReader::kBad) << b.peer_error(0);
    ASSERT_LT(++rounds, 100000);
  }
  EXPECT_GT(rounds, 10);  // streamed, not sent whole
  EXPECT_EQ(copy(a.peer_frames(1)), to_a);
  EXPECT_EQ(copy(b.peer_frames(0)), to_b);
  ASSERT_EQ(c.wait_peer(0, 0, kSecond), RingReader::kReady);
  EXPECT_EQ(copy(c.peer_frames(0)), to_c1);
  ASSERT_EQ(c.wait_peer(0, 0, kSecond), RingReader::kReady);
  EXPECT_EQ(copy(c.peer_frames(0)), to_c2);
  EXPECT_EQ(c.wait_peer(1, 0, 1'000'000), RingReader::kNothing);
}

// Engine 1 in another process answers every batch from engine 0 with its own, through the peer
// rings only, sleeping at times; sizes cross the ring's end and exceed it.
TEST(ShmPeerRings, PingPongWithAnotherProcess) {
  HarnessHub hub(2, 4096, 16384);
  const int rounds = 2000;
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    _exit([&] {
      EngineEndpoint ep(dup(hub.fd()), 1);
      return echo_rounds(
          ep, rounds, [&](std::int64_t spin) { return ep.wait_peer(0, spin, 10 * kSecond); },
          [&]() -> const std::vector<FrameView>& { return ep.peer_frames(0); },
          [&](FrameView v) { ep.send_peer(0, &v, 1); });
    }());
  }
  EngineEndpoint ep(dup(hub.fd()), 0);
  std::mt19937 rng(13);
  for (int i = 0; i < rounds; ++i) {
    std::string body(rng() % 40000, static_cast<char>('A' + i % 26));
    FrameView v{body.data(), body.size()};
    ep.send_peer(1, &v, 1);
    RingReader::Status st;
    while ((st = ep.wait_peer(1, i % 3 ? 20'000 : 0, 10 * kSecond)) == RingReader::kNothing) {}
    ASSERT_EQ(st, RingReader::kReady);
    const auto& f = ep.peer_frames(1);
    ASSERT_EQ(f.size(), 1u);
    ASSERT_EQ(std::string(f[0].data, f[0].size), std::to_string(i) + ":" + body);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

}  // namespace
}  // namespace cais::shm
