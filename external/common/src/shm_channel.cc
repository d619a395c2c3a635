#include "cais/shm_channel.h"

#include <linux/futex.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <new>
#include <stdexcept>
#include <system_error>

namespace cais::shm {

// ------------------------------------------------------------------ layout
namespace {

struct SegmentHeader {
  std::uint32_t magic;
  std::uint32_t version;
  std::uint32_t engines;
  std::uint32_t reserved;
  std::uint64_t ring_bytes;
  std::uint64_t total_bytes;
  std::uint64_t peer_ring_bytes;
};
static_assert(sizeof(SegmentHeader) <= 64, "the header shares its cache line with nothing else");

// Everything one engine's two directions need, apart from the ring data itself.
struct EngineSlot {
  Doorbell bell;
  RingControl to_engine;
  RingControl to_harness;
};

constexpr std::size_t kHeaderOffset = 0;
constexpr std::size_t kHarnessBellOffset = 64;
constexpr std::size_t kSlotsOffset = 128;
constexpr std::size_t kPage = 4096;

std::size_t round_up(std::size_t x, std::size_t to) { return (x + to - 1) / to * to; }

// Peer rings: one per ordered pair of distinct engines, numbered src * (engines - 1) + dst',
// dst' = dst with src left out.
std::size_t peer_index(std::uint32_t engines, std::uint32_t src, std::uint32_t dst) {
  return std::size_t{src} * (engines - 1) + (dst < src ? dst : dst - 1);
}

std::size_t peer_rings(std::uint32_t engines) { return engines ? std::size_t{engines} * (engines - 1) : 0; }

std::size_t peer_controls_offset(std::uint32_t engines) { return kSlotsOffset + engines * sizeof(EngineSlot); }

std::size_t data_offset(std::uint32_t engines, bool peers) {
  return round_up(peer_controls_offset(engines) + (peers ? peer_rings(engines) * sizeof(RingControl) : 0), kPage);
}

std::size_t total_bytes(std::uint32_t engines, std::uint64_t ring, std::uint64_t peer_ring) {
  return data_offset(engines, peer_ring > 0) + 2ull * engines * ring + peer_rings(engines) * peer_ring;
}

std::uint64_t pow2_at_least(std::uint64_t x) {
  std::uint64_t p = kPage;
  while (p < x) p <<= 1;
  return p;
}

[[noreturn]] void throw_errno(const char* what) { throw std::system_error(errno, std::generic_category(), what); }

}  // namespace

// ------------------------------------------------------------------ segment
Segment Segment::create(std::uint32_t engines, std::uint64_t ring_bytes, std::uint64_t peer_ring_bytes) {
  ring_bytes = pow2_at_least(ring_bytes);  // index arithmetic by mask
  if (peer_ring_bytes) peer_ring_bytes = pow2_at_least(peer_ring_bytes);
  Segment s;
  s.size_ = total_bytes(engines, ring_bytes, peer_ring_bytes);
  // memfd: no name in /dev/shm to leak; freed when the last process holding it exits.
  s.fd_ = static_cast<int>(syscall(SYS_memfd_create, "cais-cosim", MFD_CLOEXEC));
  if (s.fd_ < 0) throw_errno("memfd_create");
  if (ftruncate(s.fd_, static_cast<off_t>(s.size_)) != 0) throw_errno("ftruncate");
  void* p = mmap(nullptr, s.size_, PROT_READ | PROT_WRITE, MAP_SHARED, s.fd_, 0);
  if (p == MAP_FAILED) throw_errno("mmap");
  s.base_ = static_cast<char*>(p);
  new (s.base_ + kHarnessBellOffset) Doorbell();
  for (std::uint32_t i = 0; i < engines; ++i)
    new (s.base_ + kSlotsOffset + i * sizeof(EngineSlot)) EngineSlot();
  if (peer_ring_bytes)
    for (std::size_t i = 0; i < peer_rings(engines); ++i)
      new (s.base_ + peer_controls_offset(engines) + i * sizeof(RingControl)) RingControl();
  auto* h = reinterpret_cast<SegmentHeader*>(s.base_ + kHeaderOffset);
  *h = SegmentHeader{kSegmentMagic, kSegmentVersion, engines, 0, ring_bytes, s.size_, peer_ring_bytes};
  return s;
}

Segment Segment::attach(int fd) {
  struct stat st {};
  if (fstat(fd, &st) != 0) throw_errno("fstat of the shared-memory segment");
  if (static_cast<std::size_t>(st.st_size) < kPage) throw std::runtime_error("shared-memory segment too small");
  Segment s;
  s.fd_ = fd;
  s.size_ = static_cast<std::size_t>(st.st_size);
  void* p = mmap(nullptr, s.size_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) throw_errno("mmap of the shared-memory segment");
  s.base_ = static_cast<char*>(p);
  const auto* h = reinterpret_cast<const SegmentHeader*>(s.base_ + kHeaderOffset);
  if (h->magic != kSegmentMagic || h->version != kSegmentVersion ||
      h->total_bytes != total_bytes(h->engines, h->ring_bytes, h->peer_ring_bytes) || h->total_bytes > s.size_)
    throw std::runtime_error("not a cais shared-memory segment of this version");
  return s;
}

Segment::Segment(Segment&& o) noexcept { *this = std::move(o); }

Segment& Segment::operator=(Segment&& o) noexcept {
  std::swap(fd_, o.fd_);
  std::swap(base_, o.base_);
  std::swap(size_, o.size_);
  return *this;
}

Segment::~Segment() {
  if (base_) munmap(base_, size_);
  if (fd_ >= 0) close(fd_);
}

std::uint32_t Segment::engines() const { return reinterpret_cast<const SegmentHeader*>(base_)->engines; }
std::uint64_t Segment::ring_bytes() const { return reinterpret_cast<const SegmentHeader*>(base_)->ring_bytes; }
std::uint64_t Segment::peer_ring_bytes() const {
  return reinterpret_cast<const SegmentHeader*>(base_)->peer_ring_bytes;
}
Doorbell* Segment::harness_bell() { return reinterpret_cast<Doorbell*>(base_ + kHarnessBellOffset); }

static EngineSlot* slot(char* base, std::uint32_t i) {
  return reinterpret_cast<EngineSlot*>(base + kSlotsOffset + i * sizeof(EngineSlot));
}
Doorbell* Segment::engine_bell(std::uint32_t i) { return &slot(base_, i)->bell; }
RingControl* Segment::to_engine(std::uint32_t i) { return &slot(base_, i)->to_engine; }
RingControl* Segment::to_harness(std::uint32_t i) { return &slot(base_, i)->to_harness; }
char* Segment::to_engine_data(std::uint32_t i) {
  return base_ + data_offset(engines(), peer_ring_bytes() > 0) + 2ull * i * ring_bytes();
}
char* Segment::to_harness_data(std::uint32_t i) { return to_engine_data(i) + ring_bytes(); }
RingControl* Segment::peer(std::uint32_t src, std::uint32_t dst) {
  return reinterpret_cast<RingControl*>(base_ + peer_controls_offset(engines()) +
                                        peer_index(engines(), src, dst) * sizeof(RingControl));
}
char* Segment::peer_data(std::uint32_t src, std::uint32_t dst) {
  return to_engine_data(engines()) + peer_index(engines(), src, dst) * peer_ring_bytes();
}

// ------------------------------------------------------------------ doorbells and waiting
namespace {

void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

std::int64_t now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

// Not FUTEX_PRIVATE: the word is shared between processes.
void futex_wait(std::atomic<std::uint32_t>* word, std::uint32_t seen, std::int64_t timeout_ns) {
  timespec ts{static_cast<time_t>(timeout_ns / 1000000000), static_cast<long>(timeout_ns % 1000000000)};
  syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(word), FUTEX_WAIT, seen, &ts, nullptr, 0);
}

void futex_wake(std::atomic<std::uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

// Pauses between two polls while spinning: long enough not to hammer the peer's cache lines,
// short against a wake-up.
constexpr int kPausesPerPoll = 16;

// Spins (pause, then sched_yield so a runnable peer on this core gets it) until progress() or
// spin_ns; then sleeps on `own` until progress() or max_ns in all.
template <class Progress>
bool wait_for(Doorbell* own, std::int64_t spin_ns, std::int64_t max_ns, Progress&& progress) {
  const std::int64_t t0 = now_ns();
  const std::int64_t spin_end = std::min(spin_ns, max_ns);
  for (;;) {
    if (progress()) return true;
    if (now_ns() - t0 >= spin_end) break;
    for (int k = 0; k < kPausesPerPoll; ++k) cpu_relax();
    sched_yield();
  }
  for (;;) {
    const std::int64_t left = max_ns - (now_ns() - t0);
    if (left <= 0) return false;
    const std::uint32_t seen = own->seq.load(std::memory_order_acquire);
    own->sleeping.store(1, std::memory_order_relaxed);
    // Announce the sleep before the last look, so a peer publishing now sees the flag (or we see
    // its data): the two seq_cst fences order store-then-load on both sides.
    std::atomic_thread_fence(std::memory_order_seq_cst);
    const bool ready = progress();
    if (!ready) futex_wait(&own->seq, seen, left);
    own->sleeping.store(0, std::memory_order_relaxed);
    if (ready || progress()) return true;
  }
}

}  // namespace

void notify(Doorbell* bell) {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (bell->sleeping.load(std::memory_order_relaxed)) {
    bell->seq.fetch_add(1, std::memory_order_release);
    futex_wake(&bell->seq);
  }
}

// ------------------------------------------------------------------ framing
namespace {

constexpr std::size_t kHeaderBytes = 24;

std::uint64_t pad8(std::uint64_t n) { return (n + 7) & ~std::uint64_t{7}; }

std::uint64_t body_bytes(const FrameView* frames, std::size_t n) {
  std::uint64_t body = 8 * n;
  for (std::size_t i = 0; i < n; ++i) body += pad8(frames[i].size);
  return body;
}

void encode_header(char* out, std::uint32_t frames, std::uint64_t seq, std::uint64_t body) {
  std::memcpy(out, &kMessageMagic, 4);
  std::memcpy(out + 4, &frames, 4);
  std::memcpy(out + 8, &seq, 8);
  std::memcpy(out + 16, &body, 8);
}

// Writes one framed message through `put(data, n)`.
template <class Put>
void encode_message(Put&& put, const FrameView* frames, std::size_t n, std::uint64_t seq) {
  static const char zeros[8] = {};
  char header[kHeaderBytes];
  encode_header(header, static_cast<std::uint32_t>(n), seq, body_bytes(frames, n));
  put(header, kHeaderBytes);
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint64_t len = frames[i].size;
    put(reinterpret_cast<const char*>(&len), 8);
  }
  for (std::size_t i = 0; i < n; ++i) {
    put(frames[i].data, frames[i].size);
    put(zeros, pad8(frames[i].size) - frames[i].size);
  }
}

}  // namespace

// ------------------------------------------------------------------ writer
RingWriter::RingWriter(RingControl* ctl, char* data, std::uint64_t capacity, Doorbell* reader_bell)
    : ctl_(ctl), data_(data), cap_(capacity), reader_bell_(reader_bell),
      head_(ctl->head.load(std::memory_order_relaxed)) {}

std::uint64_t RingWriter::free_space() const {
  return cap_ - (head_ + staged_ - ctl_->tail.load(std::memory_order_acquire));
}

void RingWriter::put(const char* src, std::uint64_t n) {
  const std::uint64_t pos = (head_ + staged_) & (cap_ - 1);
  const std::uint64_t first = std::min(n, cap_ - pos);
  std::memcpy(data_ + pos, src, first);
  std::memcpy(data_, src + first, n - first);
  staged_ += n;
}

void RingWriter::publish(bool wake) {
  head_ += staged_;
  staged_ = 0;
  ctl_->head.store(head_, std::memory_order_release);
  if (wake) notify(reader_bell_);
}

void RingWriter::send(const FrameView* frames, std::size_t n, bool wake) {
  const std::uint64_t total = kHeaderBytes + body_bytes(frames, n);
  if (!backlogged() && total <= free_space()) {  // the common case: straight into the ring
    encode_message([this](const char* d, std::uint64_t k) { put(d, k); }, frames, n, seq_++);
    publish(wake);
    return;
  }
  encode_message([this](const char* d, std::uint64_t k) { backlog_.append(d, k); }, frames, n, seq_++);
  flush(wake);
}

void RingWriter::send_raw(const char* data, std::size_t n) {
  backlog_.append(data, n);
  flush();
}

bool RingWriter::flush(bool wake) {
  if (!backlogged()) return false;
  const std::uint64_t k = std::min<std::uint64_t>(free_space(), backlog_.size() - backlog_off_);
  if (k > 0) {
    put(backlog_.data() + backlog_off_, k);
    publish(wake);
    backlog_off_ += k;
  }
  if (!backlogged()) {
    backlog_.clear();
    backlog_off_ = 0;
    ctl_->writer_waiting.store(0, std::memory_order_relaxed);
    return false;
  }
  ctl_->writer_waiting.store(1, std::memory_order_relaxed);
  return true;
}

// ------------------------------------------------------------------ reader
RingReader::RingReader(RingControl* ctl, const char* data, std::uint64_t capacity, Doorbell* writer_bell)
    : ctl_(ctl), data_(data), cap_(capacity), writer_bell_(writer_bell),
      tail_(ctl->tail.load(std::memory_order_relaxed)) {}

RingReader::Status RingReader::fail(std::string why) {
  error_ = std::move(why);
  state_ = kBad;
  return kBad;
}

bool RingReader::check_header() {
  std::uint32_t magic, n;
  std::uint64_t seq, body;
  std::memcpy(&magic, msg_.data(), 4);
  std::memcpy(&n, msg_.data() + 4, 4);
  std::memcpy(&seq, msg_.data() + 8, 8);
  std::memcpy(&body, msg_.data() + 16, 8);
  if (magic != kMessageMagic) return fail("bad frame header (magic)"), false;
  if (seq != seq_) return fail("bad frame header (sequence " + std::to_string(seq) + ", expected " +
                               std::to_string(seq_) + ")"), false;
  if (n == 0 || n > kMaxFrames || body % 8 != 0 || body < 8ull * n || body > kMaxMessageBytes)
    return fail("bad frame header (sizes)"), false;
  need_ = kHeaderBytes + body;
  return true;
}

bool RingReader::split_frames() {
  std::uint32_t n;
  std::memcpy(&n, msg_.data() + 4, 4);
  const char* lens = msg_.data() + kHeaderBytes;
  const char* p = lens + 8ull * n;
  const char* end = msg_.data() + need_;
  frames_.clear();
  for (std::uint32_t i = 0; i < n; ++i) {
    std::uint64_t len;
    std::memcpy(&len, lens + 8ull * i, 8);
    if (len > static_cast<std::uint64_t>(end - p) || pad8(len) > static_cast<std::uint64_t>(end - p))
      return fail("frame lengths do not match the message size"), false;
    frames_.push_back({p, static_cast<std::size_t>(len)});
    p += pad8(len);
  }
  if (p != end) return fail("frame lengths do not match the message size"), false;
  return true;
}

RingReader::Status RingReader::poll() {
  if (state_ != kNothing) return state_;
  const std::uint64_t head = ctl_->head.load(std::memory_order_acquire);
  const std::uint64_t start = tail_;
  Status result = kNothing;
  while (head != tail_) {
    if (need_ == 0) {  // a new message: its header first
      need_ = kHeaderBytes;
      have_ = 0;
      msg_.resize(kHeaderBytes);
    }
    const std::uint64_t k = std::min<std::uint64_t>(head - tail_, need_ - have_);
    const std::uint64_t pos = tail_ & (cap_ - 1);
    const std::uint64_t first = std::min(k, cap_ - pos);
    std::memcpy(msg_.data() + have_, data_ + pos, first);
    std::memcpy(msg_.data() + have_ + first, data_, k - first);
    have_ += k;
    tail_ += k;
    if (have_ < need_) continue;
    if (need_ == kHeaderBytes) {
      if (!check_header()) { result = kBad; break; }
      try {
        msg_.resize(need_);
      } catch (const std::bad_alloc&) {
        result = fail("message of " + std::to_string(need_) + " bytes cannot be held");
        break;
      }
      if (have_ < need_) continue;
    }
    if (!split_frames()) { result = kBad; break; }
    ++seq_;
    result = state_ = kReady;
    break;
  }
  if (tail_ != start) {
    ctl_->tail.store(tail_, std::memory_order_release);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (ctl_->writer_waiting.load(std::memory_order_relaxed)) notify(writer_bell_);
  }
  return result;
}

void RingReader::release() {
  if (state_ != kReady) return;
  state_ = kNothing;
  need_ = have_ = 0;
  frames_.clear();
}

// ------------------------------------------------------------------ harness hub
HarnessHub::HarnessHub(std::uint32_t engines, std::uint64_t ring_bytes, std::uint64_t peer_ring_bytes)
    : seg_(Segment::create(engines, ring_bytes, peer_ring_bytes)) {
  const std::uint64_t cap = seg_.ring_bytes();
  for (std::uint32_t i = 0; i < engines; ++i) {
    writers_.emplace_back(seg_.to_engine(i), seg_.to_engine_data(i), cap, seg_.engine_bell(i));
    readers_.emplace_back(seg_.to_harness(i), seg_.to_harness_data(i), cap, seg_.engine_bell(i));
  }
}

void HarnessHub::send(std::uint32_t engine, const FrameView* frames, std::size_t n, bool wake) {
  writers_.at(engine).send(frames, n, wake);
}

RingReader::Status HarnessHub::poll_all(std::uint32_t* engine) {
  const std::uint32_t n = engines();
  for (auto& w : writers_) w.flush();
  for (std::uint32_t k = 0; k < n; ++k) {
    const std::uint32_t i = (next_ + k) % n;
    const RingReader::Status st = readers_[i].poll();
    if (st != RingReader::kNothing) {
      *engine = i;
      next_ = (i + 1) % n;
      return st;
    }
  }
  return RingReader::kNothing;
}

RingReader::Status HarnessHub::wait_any(std::int64_t spin_ns, std::int64_t max_ns, std::uint32_t* engine) {
  if (engines() == 0) return RingReader::kNothing;
  for (auto& r : readers_) r.release();  // the previous message was consumed by the caller
  RingReader::Status st = RingReader::kNothing;
  wait_for(seg_.harness_bell(), spin_ns, max_ns, [&] { return (st = poll_all(engine)) != RingReader::kNothing; });
  return st;
}

// ------------------------------------------------------------------ engine endpoint
static std::uint32_t checked_slot(const Segment& seg, std::uint32_t engine) {
  if (engine >= seg.engines())
    throw std::runtime_error("engine slot " + std::to_string(engine) + " is not in the shared-memory segment");
  return engine;
}

EngineEndpoint::EngineEndpoint(int fd, std::uint32_t engine)
    : seg_(Segment::attach(fd)),
      engine_(checked_slot(seg_, engine)),
      writer_(seg_.to_harness(engine), seg_.to_harness_data(engine), seg_.ring_bytes(), seg_.harness_bell()),
      reader_(seg_.to_engine(engine), seg_.to_engine_data(engine), seg_.ring_bytes(), seg_.harness_bell()) {
  const std::uint64_t cap = seg_.peer_ring_bytes();
  if (cap == 0) return;
  to_peer_.resize(seg_.engines());
  from_peer_.resize(seg_.engines());
  for (std::uint32_t other = 0; other < seg_.engines(); ++other) {
    if (other == engine_) continue;
    to_peer_[other] = std::make_unique<RingWriter>(seg_.peer(engine_, other), seg_.peer_data(engine_, other), cap,
                                                   seg_.engine_bell(other));
    from_peer_[other] = std::make_unique<RingReader>(seg_.peer(other, engine_), seg_.peer_data(other, engine_), cap,
                                                     seg_.engine_bell(other));
  }
}

bool EngineEndpoint::flush_all() {
  bool left = writer_.flush();
  for (auto& w : to_peer_)
    if (w) left |= w->flush();
  return left;
}

RingReader::Status EngineEndpoint::wait(std::int64_t spin_ns, std::int64_t max_ns) {
  reader_.release();
  RingReader::Status st = RingReader::kNothing;
  wait_for(seg_.engine_bell(engine_), spin_ns, max_ns, [&] {
    flush_all();  // a peer may be waiting for the rest of a batch
    return (st = reader_.poll()) != RingReader::kNothing;
  });
  return st;
}

static std::uint32_t checked_peer(const std::vector<std::unique_ptr<RingWriter>>& peers, std::uint32_t other) {
  if (other >= peers.size() || !peers[other])
    throw std::runtime_error("no peer ring to engine " + std::to_string(other));
  return other;
}

void EngineEndpoint::send_peer(std::uint32_t dst, const FrameView* frames, std::size_t n) {
  to_peer_[checked_peer(to_peer_, dst)]->send(frames, n);
}

RingReader::Status EngineEndpoint::wait_peer(std::uint32_t src, std::int64_t spin_ns, std::int64_t max_ns) {
  RingReader& r = *from_peer_[checked_peer(to_peer_, src)];
  r.release();
  RingReader::Status st = RingReader::kNothing;
  wait_for(seg_.engine_bell(engine_), spin_ns, max_ns, [&] {
    flush_all();  // two engines may each wait for the rest of the other's batch
    return (st = r.poll()) != RingReader::kNothing;
  });
  return st;
}

bool EngineEndpoint::drain(std::int64_t max_ns) {
  return wait_for(seg_.engine_bell(engine_), 0, max_ns, [&] { return !flush_all(); });
}

}  // namespace cais::shm
