#include "cais/engine_host.h"

#include <unistd.h>

#include <chrono>
#include <csignal>
#include <iostream>
#include <random>
#include <set>
#include <thread>

#include "cais/errors.h"

namespace cais {

// ------------------------------------------------------------------ registry
NodeRegistry& NodeRegistry::instance() {
  static NodeRegistry r;
  return r;
}

void NodeRegistry::add(proto::NodeKind kind, const std::string& model, NodeFactory f) {
  factories_[{static_cast<int>(kind), model}] = std::move(f);
}

const NodeFactory* NodeRegistry::find(proto::NodeKind kind, const std::string& model) const {
  auto it = factories_.find({static_cast<int>(kind), model});
  return it == factories_.end() ? nullptr : &it->second;
}

std::vector<std::string> NodeRegistry::models(proto::NodeKind kind) const {
  std::vector<std::string> out;
  for (const auto& kv : factories_)
    if (kv.first.first == static_cast<int>(kind)) out.push_back(kv.first.second);
  return out;
}

// ------------------------------------------------------------------ hosted model
void HostedModel::configure(const proto::Configure& cfg) {
  sim_.configure(cfg);
  auto& reg = NodeRegistry::instance();
  std::vector<std::string> prefixes;
  sim_.params().ignore_prefix("host.");  // a process hosting only GPUs has no switch model
  std::set<const NodeFactory*> set_up;
  std::vector<std::pair<std::uint32_t, const NodeFactory*>> plan;
  for (std::uint32_t id : sim_.hosted_nodes()) {
    const auto kind = sim_.node(id).kind;
    const std::string key = kind == proto::NODE_GPU ? "host.gpu_model" : "host.switch_model";
    std::vector<std::string> allowed = reg.models(kind);
    const std::string model = sim_.params().get_enum(key, allowed);
    const NodeFactory* f = reg.find(kind, model);
    plan.emplace_back(id, f);
  }
  for (auto& [id, f] : plan) {
    if (set_up.insert(f).second) {
      for (const auto& p : f->param_prefixes) prefixes.push_back(p);
      if (f->setup) f->setup(sim_);
    }
  }
  for (auto& [id, f] : plan) {
    nodes_.push_back(f->build(sim_, id));
    sim_.attach_node(id, nodes_.back().get());
  }
  sim_.params().reject_unread(prefixes);
}

bool HostedModel::done() const {
  for (const auto& n : nodes_)
    if (!n->done()) return false;
  return true;
}

std::string HostedModel::blocked_reason() const {
  for (const auto& n : nodes_) {
    std::string r = n->blocked_reason();
    if (!r.empty()) return n->name() + ": " + r;
  }
  return {};
}

void HostedModel::check_drained() const {
  for (const auto& n : nodes_) n->check_drained();
}

void HostedModel::export_stats(proto::Stats* out) {
  sim_.stats().export_to(out);
}

// ------------------------------------------------------------------ links
void EngineLink::send_batch(std::uint32_t, const std::vector<FrameView>&) {
  throw ProtocolError("this transport carries packet batches through the harness only");
}

const std::vector<FrameView>& EngineLink::recv_batch(std::uint32_t) {
  throw ProtocolError("this transport carries packet batches through the harness only");
}

// ------------------------------------------------------------------ protocol loop
namespace {

std::string serialize(const proto::Control& c) {
  std::string bytes;
  c.SerializeToString(&bytes);
  return bytes;
}

void send_error(EngineLink& link, const std::string& name, const std::string& msg, const std::string& key) {
  proto::Control c;
  auto* e = c.mutable_error();
  e->set_engine_name(name);
  e->set_message(msg);
  e->set_key(key);
  link.send(serialize(c), {});
  link.finish();
}

}  // namespace

int run_engine_host(EngineLink& link, const std::string& name, const FaultInjection& fault) {
  {  // hello: lets the harness know this process is up
    proto::Control hello;
    hello.mutable_ready()->set_engine_name(name);
    hello.mutable_ready()->set_pid(static_cast<std::uint32_t>(getpid()));
    hello.mutable_ready()->set_next_event_ps(kNever);
    link.send(serialize(hello), {});
  }

  HostedModel model;
  std::uint64_t window = 0;
  TimePs window_ps = 0;
  std::vector<FrameView> frames;
  std::vector<std::string> out_frames;
  std::string peer_header;
  std::vector<FrameView> peer_frames;
  // Kept across windows, in and out: its records keep their capacity.
  proto::PacketBatch batch;
  try {
    for (;;) {
      if (!link.recv(frames)) return 3;  // the harness is gone
      if (frames.empty()) throw ProtocolError("empty message");
      proto::Control ctl;
      if (!ctl.ParseFromArray(frames[0].data, static_cast<int>(frames[0].size)))
        throw ProtocolError("undecodable control message");

      switch (ctl.msg_case()) {
        case proto::Control::kConfigure: {
          model.configure(ctl.configure());
          window_ps = ctl.configure().window_ps();
          proto::Control reply;
          auto* r = reply.mutable_ready();
          r->set_engine_name(name);
          r->set_next_event_ps(model.sim().next_event_time());
          r->set_pid(static_cast<std::uint32_t>(getpid()));
          for (const auto& node : model.nodes()) r->add_components(node->name());
          link.send(serialize(reply), {});
          break;
        }
        case proto::Control::kAdvance: {
          ++window;
          if (fault.at_window != 0 && window == fault.at_window) {
            std::cerr << name << ": fault injection: " << fault.kind << " at window " << window << std::endl;
            if (fault.kind == "crash") std::abort();
            if (fault.kind == "hang") for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
            if (fault.kind == "garbage") {
              std::string junk(64, '\0');
              std::mt19937 g(7);
              for (auto& ch : junk) ch = static_cast<char>(g());
              link.send_garbage(junk);
              continue;
            }
          }
          const auto& adv = ctl.advance();
          Sim& sim = model.sim();
          sim.set_window_start(adv.until_ps() > window_ps ? adv.until_ps() - window_ps : 0);
          if (frames.size() != 1 + adv.num_batches()) throw ProtocolError("batch count does not match frames");
          for (std::size_t i = 1; i < frames.size(); ++i) {
            if (!batch.ParseFromArray(frames[i].data, static_cast<int>(frames[i].size)))
              throw ProtocolError("undecodable packet batch");
            sim.deliver_inbound(batch.records(), batch.packets());
          }
          for (const std::uint32_t src : adv.batch_src()) {  // batches in peer rings
            const std::vector<FrameView>& peer = link.recv_batch(src);
            if (peer.size() != 2 || !batch.ParseFromArray(peer[0].data, static_cast<int>(peer[0].size)) ||
                batch.src_engine() != src || batch.dst_engine() != sim.engine_index() || !batch.records().empty())
              throw ProtocolError("malformed packet batch from engine " + std::to_string(src));
            sim.deliver_inbound(std::string_view(peer[1].data, peer[1].size), batch.packets());
          }
          sim.run_until(adv.until_ps(), adv.max_events() ? adv.max_events() : UINT64_MAX);
          proto::Control reply;
          auto* wd = reply.mutable_window_done();
          wd->set_now_ps(sim.now());  // time of the last event processed
          wd->set_next_event_ps(sim.next_event_time());
          wd->set_events(sim.events_processed());
          out_frames.clear();
          auto& outbox = sim.outbox();
          for (std::uint32_t dst = 0; dst < outbox.size(); ++dst) {
            Sim::Outbound& b = outbox[dst];
            if (b.packets == 0) continue;
            wd->add_batch_dst(dst);
            wd->add_batch_min_ps(b.min_arrival);
            batch.Clear();
            batch.set_src_engine(sim.engine_index());
            batch.set_dst_engine(dst);
            batch.set_packets(b.packets);
            if (link.direct_batches()) {  // the header, then the records as they are: one copy, into the ring
              batch.SerializeToString(&peer_header);
              peer_frames.assign({{peer_header.data(), peer_header.size()}, {b.records.data(), b.records.size()}});
              link.send_batch(dst, peer_frames);
              continue;
            }
            batch.mutable_records()->swap(b.records);  // lent for the serialisation, then given back
            out_frames.emplace_back();
            batch.SerializeToString(&out_frames.back());
            batch.mutable_records()->swap(b.records);
          }
          sim.clear_outbox();
          const bool done = model.done();
          wd->set_done(done);
          if (!done && sim.next_event_time() == kNever) wd->set_blocked_reason(model.blocked_reason());
          link.send(serialize(reply), out_frames);
          break;
        }
        case proto::Control::kGetStats: {
          model.sim().set_end_time(ctl.get_stats().end_ps());
          model.check_drained();
          proto::Control reply;
          model.export_stats(reply.mutable_stats());
          auto* ev = reply.mutable_stats()->add_stats();
          ev->set_name("engine." + name + ".events");
          ev->set_unit("events");
          ev->set_value(static_cast<double>(model.sim().events_processed()));
          link.send(serialize(reply), {});
          break;
        }
        case proto::Control::kShutdown:
          link.finish();
          return 0;
        default:
          throw ProtocolError("unexpected control message");
      }
    }
  } catch (const ConfigError& e) {
    std::cerr << name << ": configuration error: " << e.what() << std::endl;
    send_error(link, name, e.what(), e.key());
    return 2;
  } catch (const std::exception& e) {
    std::cerr << name << ": " << e.what() << std::endl;
    send_error(link, name, e.what(), "");
    return 1;
  }
}

}  // namespace cais
