// How an engine process talks to the harness: ZeroMQ (ipc://, tcp://) or the shared-memory
// channel of cais/shm_channel.h. Both carry the same messages: a serialized Control frame,
// then opaque packet-batch frames.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cais/shm_channel.h"

namespace cais {

using shm::FrameView;

class EngineLink {
 public:
  virtual ~EngineLink() = default;
  // Next message; the frames stay valid until the next call. False once the harness is gone.
  // Throws ProtocolError on bytes that are not a message.
  virtual bool recv(std::vector<FrameView>& frames) = 0;
  virtual void send(const std::string& control, const std::vector<std::string>& batches) = 0;
  // Fault injection: bytes that are not a well-formed message.
  virtual void send_garbage(const std::string& junk) = 0;
  // Before exiting: gives the last message a chance to leave.
  virtual void finish() {}
};

// A DEALER socket with routing id `name`, connected to the harness's ROUTER at `endpoint`.
std::unique_ptr<EngineLink> connect_zmq(const std::string& endpoint, const std::string& name);

// Slot `engine` of the shared-memory segment open as `fd`. Waiting for a message spins up to
// spin_ns before sleeping.
std::unique_ptr<EngineLink> attach_shm(int fd, std::uint32_t engine, std::int64_t spin_ns);

}  // namespace cais
