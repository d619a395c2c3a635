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

  // Packet batches straight between engine processes (the shared-memory transport's peer
  // rings), instead of as frames of WindowDone and Advance through the harness. send_batch()
  // queues one batch (its frames) for engine `dst`; recv_batch() returns the next batch from
  // engine `src`, valid until the next recv_batch(src). Only where direct_batches().
  virtual bool direct_batches() const { return false; }
  virtual void send_batch(std::uint32_t dst, const std::vector<FrameView>& frames);
  virtual const std::vector<FrameView>& recv_batch(std::uint32_t src);
};

// A DEALER socket with routing id `name`, connected to the harness's ROUTER at `endpoint`.
std::unique_ptr<EngineLink> connect_zmq(const std::string& endpoint, const std::string& name);

// Slot `engine` of the shared-memory segment open as `fd`. Waiting for a message spins up to
// spin_ns before sleeping.
std::unique_ptr<EngineLink> attach_shm(int fd, std::uint32_t engine, std::int64_t spin_ns);

}  // namespace cais
