// The engine's end of the ZeroMQ transport (ipc:// and tcp://).
#include <unistd.h>

#include <chrono>
#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "cais/engine_link.h"
#include "cais/errors.h"

namespace cais {
namespace {

class ZmqLink final : public EngineLink {
 public:
  ZmqLink(const std::string& endpoint, const std::string& name)
      : ctx_(1), sock_(ctx_, zmq::socket_type::dealer), parent_(getppid()) {
    sock_.set(zmq::sockopt::routing_id, name);
    sock_.set(zmq::sockopt::linger, 1000);  // lets a last Error reach the harness
    sock_.connect(endpoint);
  }

  bool recv(std::vector<FrameView>& frames) override {
    // Poll so that an engine whose harness died does not linger forever.
    zmq::pollitem_t item{static_cast<void*>(sock_), 0, ZMQ_POLLIN, 0};
    while (zmq::poll(&item, 1, std::chrono::milliseconds(1000)) == 0)
      if (getppid() != parent_) return false;
    msgs_.clear();
    auto n = zmq::recv_multipart(sock_, std::back_inserter(msgs_));
    if (!n || msgs_.empty()) throw ProtocolError("empty message");
    frames.clear();
    for (auto& m : msgs_) frames.push_back({static_cast<const char*>(m.data()), m.size()});
    return true;
  }

  void send(const std::string& control, const std::vector<std::string>& batches) override {
    sock_.send(zmq::buffer(control), batches.empty() ? zmq::send_flags::none : zmq::send_flags::sndmore);
    for (std::size_t i = 0; i < batches.size(); ++i)
      sock_.send(zmq::buffer(batches[i]), i + 1 < batches.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
  }

  void send_garbage(const std::string& junk) override { sock_.send(zmq::buffer(junk), zmq::send_flags::none); }

 private:
  zmq::context_t ctx_;
  zmq::socket_t sock_;
  pid_t parent_;
  std::vector<zmq::message_t> msgs_;
};

}  // namespace

std::unique_ptr<EngineLink> connect_zmq(const std::string& endpoint, const std::string& name) {
  return std::make_unique<ZmqLink>(endpoint, name);
}

}  // namespace cais
