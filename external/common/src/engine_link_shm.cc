// The engine's end of the shared-memory transport (cais/shm_channel.h).
#include <unistd.h>

#include "cais/engine_link.h"
#include "cais/errors.h"

namespace cais {
namespace {

// How long one sleep lasts before the engine checks that its harness still exists.
constexpr std::int64_t kParentCheckNs = 200'000'000;
constexpr std::int64_t kFinishNs = 1'000'000'000;

class ShmLink final : public EngineLink {
 public:
  ShmLink(int fd, std::uint32_t engine, std::int64_t spin_ns)
      : ep_(fd, engine), spin_ns_(spin_ns), parent_(getppid()) {}

  bool recv(std::vector<FrameView>& frames) override {
    shm::RingReader::Status st;
    std::int64_t spin = spin_ns_;
    while ((st = ep_.wait(spin, kParentCheckNs)) == shm::RingReader::kNothing) {
      if (getppid() != parent_) return false;
      spin = 0;  // spinning again after a long quiet spell would only burn a core
    }
    if (st == shm::RingReader::kBad) throw ProtocolError("undecodable message on the shared-memory channel: " +
                                                         ep_.error());
    frames = ep_.frames();
    return true;
  }

  void send(const std::string& control, const std::vector<std::string>& batches) override {
    views_.clear();
    views_.push_back({control.data(), control.size()});
    for (const auto& b : batches) views_.push_back({b.data(), b.size()});
    ep_.send(views_.data(), views_.size());
  }

  void send_garbage(const std::string& junk) override { ep_.send_raw(junk.data(), junk.size()); }

  void finish() override { ep_.drain(kFinishNs); }

  bool direct_batches() const override { return ep_.has_peers(); }

  void send_batch(std::uint32_t dst, const std::vector<FrameView>& frames) override {
    if (!ep_.has_peers()) return EngineLink::send_batch(dst, frames);  // refuses
    ep_.send_peer(dst, frames.data(), frames.size());
  }

  const std::vector<FrameView>& recv_batch(std::uint32_t src) override {
    if (!ep_.has_peers()) return EngineLink::recv_batch(src);  // refuses
    shm::RingReader::Status st;
    std::int64_t spin = spin_ns_;
    while ((st = ep_.wait_peer(src, spin, kParentCheckNs)) == shm::RingReader::kNothing) {
      if (getppid() != parent_) throw ProtocolError("the harness is gone");
      spin = 0;
    }
    if (st == shm::RingReader::kBad)
      throw ProtocolError("undecodable batch from engine " + std::to_string(src) + ": " + ep_.peer_error(src));
    return ep_.peer_frames(src);
  }

 private:
  shm::EngineEndpoint ep_;
  std::int64_t spin_ns_;
  pid_t parent_;
  std::vector<FrameView> views_;
};

}  // namespace

std::unique_ptr<EngineLink> attach_shm(int fd, std::uint32_t engine, std::int64_t spin_ns) {
  return std::make_unique<ShmLink>(fd, engine, spin_ns);
}

}  // namespace cais
