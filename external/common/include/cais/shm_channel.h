// Shared-memory channel between the harness and the engine processes of one host.
//
// One memfd segment per run holds, for every engine, a single-producer/single-consumer byte
// ring in each direction, plus one doorbell (a futex word) per process. A message is the same
// multipart message ZeroMQ carries (a Control frame, then opaque packet-batch frames), framed as
//   [magic u32][frame count u32][sequence u64][body bytes u64]  [frame length u64] x count
//   [frame bytes, each padded to 8]
// A writer copies a message into the ring and publishes it by storing `head` (release); the
// reader copies it out and returns the space by storing `tail` (release). A message larger than
// the free space is streamed: what does not fit waits in the writer's backlog and is pushed
// whenever its owner waits (so neither side ever blocks inside a send).
//
// A segment may also hold a ring for every ordered pair of engines ("peer rings"): an engine
// writes its packet batches for another engine straight into their ring, and tells the harness
// only where they went, so batches are not copied through the harness. They are ordered: the
// writer publishes the batch before its WindowDone, the harness's Advance to the reader follows
// that, and the reader reads the batch after the Advance (release/acquire all the way).
//
// Waiting spins (pause + sched_yield, so that on a machine with fewer cores than processes the
// spinner hands its core to a runnable peer) for a bounded time, then sleeps on the process's
// doorbell. A peer rings a doorbell (futex wake) only when its owner announced it is asleep, so
// the common case of a reply within the spin bound costs no system call besides sched_yield.
// Both the engine (directly) and the Python harness (through the CPython extension in
// python/shm_module.cc) use this one implementation of the protocol.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace cais::shm {

constexpr std::uint32_t kSegmentMagic = 0x43414953;  // "CAIS"
constexpr std::uint32_t kSegmentVersion = 2;
constexpr std::uint32_t kMessageMagic = 0x4753534d;  // "MSSG"
constexpr std::uint32_t kMaxFrames = 1u << 20;
constexpr std::uint64_t kMaxMessageBytes = 1ull << 34;

// A futex word one process sleeps on. Peers bump `seq` and wake it only if `sleeping` is set.
struct alignas(64) Doorbell {
  std::atomic<std::uint32_t> seq{0};
  std::atomic<std::uint32_t> sleeping{0};
};

// Counters of one direction, each on its own cache line (written by different processes).
struct RingControl {
  alignas(64) std::atomic<std::uint64_t> head{0};            // bytes published by the writer
  alignas(64) std::atomic<std::uint64_t> tail{0};            // bytes consumed by the reader
  alignas(64) std::atomic<std::uint32_t> writer_waiting{0};  // writer has a backlog: ring it on space
};

struct FrameView {
  const char* data;
  std::size_t size;
};

// The mapping of one segment: created by the harness, attached by each engine (fd inherited).
class Segment {
 public:
  // peer_ring_bytes = 0: no peer rings. Throws std::system_error.
  static Segment create(std::uint32_t engines, std::uint64_t ring_bytes, std::uint64_t peer_ring_bytes = 0);
  static Segment attach(int fd);                                            // throws on a bad segment
  Segment(Segment&& o) noexcept;
  Segment& operator=(Segment&& o) noexcept;
  Segment(const Segment&) = delete;
  ~Segment();

  int fd() const { return fd_; }
  std::uint32_t engines() const;
  std::uint64_t ring_bytes() const;
  std::uint64_t peer_ring_bytes() const;  // 0: no peer rings
  Doorbell* harness_bell();
  Doorbell* engine_bell(std::uint32_t engine);
  RingControl* to_engine(std::uint32_t engine);
  RingControl* to_harness(std::uint32_t engine);
  char* to_engine_data(std::uint32_t engine);
  char* to_harness_data(std::uint32_t engine);
  RingControl* peer(std::uint32_t src, std::uint32_t dst);  // src != dst, both < engines()
  char* peer_data(std::uint32_t src, std::uint32_t dst);

 private:
  Segment() = default;
  int fd_ = -1;
  char* base_ = nullptr;
  std::size_t size_ = 0;
};

// Rings `bell` if its owner sleeps. Call after publishing with a release store.
void notify(Doorbell* bell);

// Producer side of one ring.
class RingWriter {
 public:
  RingWriter(RingControl* ctl, char* data, std::uint64_t capacity, Doorbell* reader_bell);
  // Queues one message; never blocks (what does not fit is pushed by later flush() calls).
  // wake = false: publish without ringing a sleeping reader's doorbell; call wake() after.
  void send(const FrameView* frames, std::size_t n, bool wake = true);
  void wake() { notify(reader_bell_); }
  // Writes bytes as they are, without framing (fault injection: garbage on the channel).
  void send_raw(const char* data, std::size_t n);
  // Pushes backlog into the ring; returns true while some of it is still waiting for space.
  bool flush(bool wake = true);
  bool backlogged() const { return backlog_off_ < backlog_.size(); }

 private:
  std::uint64_t free_space() const;
  void put(const char* data, std::uint64_t n);  // at head + staged_, wrapping; not yet published
  void publish(bool wake);

  RingControl* ctl_;
  char* data_;
  std::uint64_t cap_;
  Doorbell* reader_bell_;
  std::uint64_t head_ = 0;    // local copy of ctl_->head
  std::uint64_t staged_ = 0;  // bytes written past head_, not yet published
  std::uint64_t seq_ = 0;
  std::string backlog_;
  std::size_t backlog_off_ = 0;
};

// Consumer side of one ring: assembles one message at a time.
class RingReader {
 public:
  enum Status { kNothing, kReady, kBad };
  RingReader(RingControl* ctl, const char* data, std::uint64_t capacity, Doorbell* writer_bell);
  // Pulls available bytes; kReady once a whole message is assembled (until release()).
  Status poll();
  const std::vector<FrameView>& frames() const { return frames_; }
  void release();                                  // done with the message returned by poll()
  const std::string& error() const { return error_; }  // why poll() said kBad

 private:
  Status fail(std::string why);
  bool check_header();
  bool split_frames();

  RingControl* ctl_;
  const char* data_;
  std::uint64_t cap_;
  Doorbell* writer_bell_;
  std::uint64_t tail_ = 0;
  std::uint64_t seq_ = 0;
  std::vector<char> msg_;
  std::size_t have_ = 0;
  std::size_t need_ = 0;
  Status state_ = kNothing;
  std::vector<FrameView> frames_;
  std::string error_;
};

// The harness's end: a writer and a reader per engine, one doorbell for all of them.
class HarnessHub {
 public:
  HarnessHub(std::uint32_t engines, std::uint64_t ring_bytes, std::uint64_t peer_ring_bytes = 0);
  int fd() const { return seg_.fd(); }
  std::uint32_t engines() const { return static_cast<std::uint32_t>(readers_.size()); }
  // wake = false: publish without waking the engine if it sleeps; wake(engine) does that.
  // (A woken engine may take the harness's core at once: wake the sleepers after every engine
  // of a window has its message, or the last of them waits for the harness's next time slice.)
  void send(std::uint32_t engine, const FrameView* frames, std::size_t n, bool wake = true);
  void wake(std::uint32_t engine) { writers_.at(engine).wake(); }
  // A message (or garbage) from any engine: returns kReady/kBad with `engine` set, or kNothing
  // after max_ns. Pushes pending backlogs while it waits.
  RingReader::Status wait_any(std::int64_t spin_ns, std::int64_t max_ns, std::uint32_t* engine);
  RingReader& reader(std::uint32_t engine) { return readers_[engine]; }

 private:
  RingReader::Status poll_all(std::uint32_t* engine);
  Segment seg_;
  std::vector<RingWriter> writers_;
  std::vector<RingReader> readers_;
  std::uint32_t next_ = 0;  // round-robin start, so no engine is starved
};

// An engine's end.
class EngineEndpoint {
 public:
  EngineEndpoint(int fd, std::uint32_t engine);
  void send(const FrameView* frames, std::size_t n) { writer_.send(frames, n); }
  void send_raw(const char* data, std::size_t n) { writer_.send_raw(data, n); }
  RingReader::Status wait(std::int64_t spin_ns, std::int64_t max_ns);
  const std::vector<FrameView>& frames() const { return reader_.frames(); }
  const std::string& error() const { return reader_.error(); }
  void release() { reader_.release(); }
  // Waits up to max_ns for every backlog to drain (before exiting with a last message queued).
  bool drain(std::int64_t max_ns);

  // Peer rings (when the segment has them): a message to engine `dst`, and the next message
  // from engine `src` (its frames stay valid until the next wait_peer(src)).
  bool has_peers() const { return !to_peer_.empty(); }
  void send_peer(std::uint32_t dst, const FrameView* frames, std::size_t n);
  RingReader::Status wait_peer(std::uint32_t src, std::int64_t spin_ns, std::int64_t max_ns);
  const std::vector<FrameView>& peer_frames(std::uint32_t src) const { return from_peer_.at(src)->frames(); }
  const std::string& peer_error(std::uint32_t src) const { return from_peer_.at(src)->error(); }

 private:
  bool flush_all();  // true while some backlog is left
  Segment seg_;
  std::uint32_t engine_;
  RingWriter writer_;
  RingReader reader_;
  std::vector<std::unique_ptr<RingWriter>> to_peer_;    // by destination engine; null for this one
  std::vector<std::unique_ptr<RingReader>> from_peer_;  // by source engine; null for this one
};

}  // namespace cais::shm
