// GPU model "traffic": an endpoint that issues remote reads and writes to its peers.
//
// It is the simplest real GPU-side traffic source: requests leave over the GPU's NVLink ports
// (one per switch plane, chosen by address hash in proportion to the port's lanes), the owner
// answers reads with data and writes with an acknowledgement, and the requester counts the
// round trip. It exercises links, credits and switches end to end before (and beside) the
// full Hopper model, and gives the harness a workload whose byte counts are known exactly.
#include <array>
#include <deque>
#include <memory>
#include <random>
#include <sstream>

#include "cais/engine_host.h"
#include "cais/errors.h"
#include "cais/link.h"
#include "cais/routing.h"
#include "cais/sim.h"

namespace cais {
namespace {

enum EventKind : std::uint32_t { kIssue = 1, kPortFree = 2 };
constexpr std::uint32_t kReqVc = 0, kRespVc = 1;

class TrafficEndpoint : public NodeComponent {
 public:
  TrafficEndpoint(Sim& sim, std::uint32_t node)
      : NodeComponent(sim, sim.node(node).name, node << 8), node_(node) {
    const Params& p = sim.params();
    requests_ = p.get_uint("traffic.requests_per_gpu");
    request_bytes_ = static_cast<std::uint32_t>(p.get_uint("traffic.request_bytes"));
    read_fraction_ = p.get_double("traffic.read_fraction");
    if (read_fraction_ < 0 || read_fraction_ > 1) throw ConfigError("traffic.read_fraction", "must be in [0, 1]");
    max_outstanding_ = p.get_uint("traffic.max_outstanding");
    if (max_outstanding_ == 0) throw ConfigError("traffic.max_outstanding", "must be >= 1");
    issue_gap_ps_ = p.get_time_ps("traffic.issue_gap_ns");
    flit_bytes_ = static_cast<std::uint32_t>(p.get_uint("net.flit_bytes"));
    header_flits_ = static_cast<std::uint32_t>(p.get_uint("net.header_flits"));
    const VcLayout vcs = VcLayout::of(sim);
    if (vcs.vcs < 2) throw ConfigError("net.vcs_per_port", "the traffic endpoint needs >= 2 (requests, responses)");
    rng_ = sim.make_rng("traffic." + name());
    planes_ = init_endpoint_ports(sim, node, name(), vcs, flit_bytes_, out_, in_);
    vcs.require_fits(flits_for(request_bytes_, flit_bytes_, header_flits_),
                     "a packet of traffic.request_bytes=" + std::to_string(request_bytes_));
    if (planes_.empty() && requests_ > 0 && sim.num_gpus() > 1)  // every request leaves by a port
      throw ConfigError("topology", name() + " has no connected NVLink port but traffic.requests_per_gpu is " +
                                        std::to_string(requests_));
    queues_.resize(out_.size());
    sim.stats().counter(name() + ".requests_completed", "requests", &completed_);
    sim.stats().counter(name() + ".read_bytes", "B", &read_bytes_);
    sim.stats().counter(name() + ".write_bytes", "B", &write_bytes_);
    sim.stats().histogram(name() + ".request_latency", "ns", &latency_ns_);
    sim.stats().value(name() + ".finish_time", "ps", [this] { return static_cast<double>(finish_ps_); });
    if (requests_ > 0 && sim.num_gpus() > 1) {
      schedule(0, kIssue);
      issue_pending_ = true;
    }
  }

  void handle(const Event& e) override {
    switch (e.kind) {
      case kPacketArrival: return on_arrival(static_cast<PacketHandle>(e.arg));
      case kIssue:
        issue_pending_ = false;
        return issue();
      case kPortFree: return pump(e.arg32);
      default: throw InvariantError("traffic endpoint: unknown event");
    }
  }

  bool done() const override { return completed_ == requests_; }
  std::string blocked_reason() const override {
    if (done()) return {};
    std::ostringstream os;
    os << completed_ << " of " << requests_ << " requests complete, " << outstanding_ << " outstanding";
    return os.str();
  }
  void check_drained() const override {
    for (const auto& o : out_)
      if (o.connected() && !o.all_credits_home()) throw InvariantError(name() + ": credits not returned at end of run");
  }

 private:
  void issue() {
    while (issued_ < requests_ && outstanding_ < max_outstanding_) {
      // Peers in a seeded random order; addresses are distinct 128 B lines of the peer.
      std::uint32_t peer = static_cast<std::uint32_t>(rng_() % (sim_.num_gpus() - 1));
      if (peer >= node_) ++peer;
      const bool read = std::uniform_real_distribution<double>(0, 1)(rng_) < read_fraction_;
      const PacketHandle h = sim_.new_packet(*this);
      Packet& p = sim_.packets()[h];
      p.type = read ? proto::PKT_READ_REQ : proto::PKT_WRITE;
      p.src = node_;
      p.dst = peer;
      p.addr = (static_cast<std::uint64_t>(peer) << 40) | (issued_ * request_bytes_ + node_ * (1ull << 32));
      p.payload_bytes = read ? 0 : request_bytes_;
      p.aux = request_bytes_;  // bytes requested (reads)
      p.flits = flits_for(p.payload_bytes, flit_bytes_, header_flits_);
      p.inject_ps = sim_.now();
      p.tag = issued_;
      enqueue(h, kReqVc);
      ++issued_;
      ++outstanding_;
      if (issue_gap_ps_ > 0) {
        if (issued_ < requests_) {
          schedule(sim_.now() + issue_gap_ps_, kIssue);
          issue_pending_ = true;
        }
        return;
      }
    }
  }

  void enqueue(PacketHandle h, std::uint32_t vc) {
    const std::uint32_t port = planes_.plane(sim_.packets()[h].addr);
    queues_[port][vc].push_back(h);
    pump(port);
  }

  // Send what the port, its credits and its queues allow; responses first (they free peers).
  void pump(std::uint32_t port) {
    OutputChannel& ch = out_[port];
    if (!ch.idle_at(sim_.now())) return;  // a kPortFree event is pending
    for (std::uint32_t vc : {kRespVc, kReqVc}) {
      auto& q = queues_[port][vc];
      if (q.empty() || !ch.has_credits(vc, sim_.packets()[q.front()].flits)) continue;
      const PacketHandle h = q.front();
      q.pop_front();
      const TimePs free_at = ch.transmit(sim_, *this, h, vc);
      schedule(free_at, kPortFree, 0, port);
      return;
    }
  }

  void on_arrival(PacketHandle h) {
    Packet& p = sim_.packets()[h];
    const std::uint32_t port = p.hop_port;
    if (p.type == proto::PKT_CREDIT) {
      out_[port].return_credits(p.vc, p.count);
      sim_.packets().release(h);
      pump(port);
      return;
    }
    in_[port].accept(sim_, h);
    in_[port].pop(sim_, *this, p.vc);  // the GPU sinks packets at line rate
    switch (p.type) {
      case proto::PKT_READ_REQ:
      case proto::PKT_WRITE: {
        const bool read = p.type == proto::PKT_READ_REQ;
        const PacketHandle r = sim_.new_packet(*this);
        Packet& q = sim_.packets()[r];
        q.type = read ? proto::PKT_READ_RESP : proto::PKT_WRITE_ACK;
        q.src = node_;
        q.dst = p.src;
        q.addr = p.addr;
        q.tag = p.tag;
        q.inject_ps = p.inject_ps;
        q.payload_bytes = read ? p.aux : 0;
        q.flits = flits_for(q.payload_bytes, flit_bytes_, header_flits_);
        sim_.packets().release(h);
        enqueue(r, kRespVc);
        return;
      }
      case proto::PKT_READ_RESP:
      case proto::PKT_WRITE_ACK: {
        if (p.type == proto::PKT_READ_RESP) read_bytes_ += p.payload_bytes;
        else write_bytes_ += request_bytes_;
        latency_ns_.add(static_cast<double>(sim_.now() - p.inject_ps) / 1000.0);
        ++completed_;
        --outstanding_;
        finish_ps_ = sim_.now();
        sim_.packets().release(h);
        // With a gap, the next issue is already scheduled unless the window of outstanding
        // requests was full when it was due: then this completion restarts it.
        if (issue_gap_ps_ == 0 || !issue_pending_) issue();
        return;
      }
      default:
        throw InvariantError(name() + ": unexpected packet type " + proto::PacketType_Name(p.type));
    }
  }

  std::uint32_t node_;
  std::uint64_t requests_ = 0, issued_ = 0, outstanding_ = 0, max_outstanding_ = 1;
  bool issue_pending_ = false;  // a kIssue event is scheduled
  std::uint64_t completed_ = 0, read_bytes_ = 0, write_bytes_ = 0;
  TimePs issue_gap_ps_ = 0, finish_ps_ = 0;
  std::uint32_t request_bytes_ = 128, flit_bytes_ = 16, header_flits_ = 1;
  double read_fraction_ = 0.5;
  std::mt19937_64 rng_;
  PlaneHash planes_;
  std::vector<OutputChannel> out_;
  std::vector<InputBuffer> in_;
  std::vector<std::array<std::deque<PacketHandle>, 2>> queues_;
  Histogram latency_ns_;
};

const bool registered = [] {
  NodeFactory f;
  f.engine = "gpu";
  f.param_prefixes = {"traffic."};
  f.build = [](Sim& sim, std::uint32_t node) { return std::make_unique<TrafficEndpoint>(sim, node); };
  NodeRegistry::instance().add(proto::NODE_GPU, "traffic", std::move(f));
  return true;
}();

}  // namespace
}  // namespace cais
