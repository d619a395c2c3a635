// Packet records (cais/packet_records.h): what one process sends is what the other takes, every
// field and line; malformed batches are refused whole, with nothing taken from them.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "cais/errors.h"
#include "cais/packet_records.h"
#include "cais/sim.h"
#include "two_node_link.h"

namespace cais {
namespace {

Packet full_packet() {
  Packet p;
  p.id = 0x123456789abcull;
  p.hop_key = 0xfedcba9876ull;
  p.type = proto::PKT_CAIS_LD_RESP;
  p.src = 3;
  p.dst = 5;
  p.hop_dst = 1;
  p.hop_port = 0;
  p.vc = 6;
  p.arrival_ps = 123456789;
  p.addr = 0x4000000080ull;
  p.payload_bytes = 384;
  p.flits = 27;
  p.group = 77;
  p.tag = 1ull << 63 | 42;
  p.inject_ps = 1000;
  p.origin = 9;
  p.count = 7;
  p.aux = 0x30008;
  p.tail_ps = 123457000;
  p.lines = 3;
  p.more_lines[0] = 0x4000000100ull;
  p.more_lines[1] = 0x4000000180ull;
  p.values = {1.5, -2.25, 3.0};
  return p;
}

void expect_same(const Packet& a, const Packet& b) {
  EXPECT_EQ(a.id, b.id);
  EXPECT_EQ(a.hop_key, b.hop_key);
  EXPECT_EQ(a.type, b.type);
  EXPECT_EQ(a.src, b.src);
  EXPECT_EQ(a.dst, b.dst);
  EXPECT_EQ(a.hop_dst, b.hop_dst);
  EXPECT_EQ(a.hop_port, b.hop_port);
  EXPECT_EQ(a.vc, b.vc);
  EXPECT_EQ(a.arrival_ps, b.arrival_ps);
  EXPECT_EQ(a.addr, b.addr);
  EXPECT_EQ(a.payload_bytes, b.payload_bytes);
  EXPECT_EQ(a.flits, b.flits);
  EXPECT_EQ(a.group, b.group);
  EXPECT_EQ(a.tag, b.tag);
  EXPECT_EQ(a.inject_ps, b.inject_ps);
  EXPECT_EQ(a.origin, b.origin);
  EXPECT_EQ(a.count, b.count);
  EXPECT_EQ(a.aux, b.aux);
  EXPECT_EQ(a.tail_ps, b.tail_ps);
  ASSERT_EQ(a.lines, b.lines);
  for (std::uint32_t i = 0; i < a.lines; ++i) EXPECT_EQ(a.line_addr(i), b.line_addr(i)) << i;
  EXPECT_EQ(a.values, b.values);
}

TEST(PacketRecords, EveryFieldLineAndValueRoundTripsIntoAReusedSlot) {
  const Packet p = full_packet();
  Packet plain;  // one line, no values
  plain.type = proto::PKT_WRITE_ACK;
  plain.addr = 64;
  std::string buf;
  append_record(p, buf);
  append_record(plain, buf);
  EXPECT_EQ(buf.size(), 2 * sizeof(RecordHead) + 8 * (2 + 3));

  Packet got = full_packet();  // a slot with another packet's lines and values in it
  got.values = {9, 9, 9, 9, 9};
  const std::size_t first = read_record(buf.data(), buf.size(), got);
  expect_same(p, got);
  const std::size_t second = read_record(buf.data() + first, buf.size() - first, got);
  expect_same(plain, got);
  EXPECT_EQ(first + second, buf.size());
}

TEST(PacketRecords, ACutOrMalformedRecordIsRefusedByName) {
  std::string buf;
  append_record(full_packet(), buf);
  Packet got;
  for (std::size_t cut = 0; cut < buf.size(); ++cut)
    EXPECT_THROW(read_record(buf.data(), cut, got), ProtocolError) << cut;
  for (const std::uint32_t lines : {0u, kMaxBulkLines + 1}) {
    std::string bad = buf;
    std::memcpy(bad.data() + offsetof(RecordHead, lines), &lines, 4);
    try {
      read_record(bad.data(), bad.size(), got);
      ADD_FAILURE() << lines << " lines accepted";
    } catch (const ProtocolError& e) {
      EXPECT_NE(std::string(e.what()).find(std::to_string(lines) + " lines (1 to 16 allowed)"), std::string::npos)
          << e.what();
    }
  }
}

// Counts the packets that arrive at its node and keeps their order.
struct Sink : NodeComponent {
  Sink(Sim& sim, std::uint32_t node) : NodeComponent(sim, "sink", node << 8) {}
  void handle(const Event& e) override {
    const auto h = static_cast<PacketHandle>(e.arg);
    arrived.push_back(sim_.packets()[h]);
    sim_.packets().release(h);
  }
  bool done() const override { return true; }
  std::vector<Packet> arrived;
};

// Two processes' views of one link: node 0 in engine 0, node 1 in engine 1.
std::unique_ptr<Sim> half(std::uint32_t engine) {
  proto::Configure cfg = two_node_link({0, 1});
  cfg.set_engine_index(engine);
  cfg.add_hosted_nodes(engine);
  auto sim = std::make_unique<Sim>();
  sim->configure(cfg);
  return sim;
}

TEST(PacketRecords, APacketSentToAnotherProcessArrivesThereUnchangedAtItsTimeAndKey) {
  auto a = half(0), b = half(1);
  Sink sa(*a, 0), sb(*b, 1);
  a->attach_node(0, &sa);
  b->attach_node(1, &sb);
  std::vector<Packet> sent;
  for (int i = 0; i < 3; ++i) {
    const PacketHandle h = a->new_packet(sa);
    Packet& p = a->packets()[h];
    const std::uint64_t id = p.id;
    p = full_packet();
    p.id = id;
    p.lines = 1 + i;  // 1, 2 and 3 lines
    p.values.resize(i);
    p.hop_dst = 1;
    a->send(h, 5000 - 1000 * i, sa);  // arrivals out of order: the receiver orders them
    sent.push_back(a->packets()[h]);  // the slot is free again but still holds what was sent
  }
  ASSERT_EQ(a->outbox()[1].packets, 3u);
  EXPECT_EQ(a->outbox()[1].min_arrival, 3000u);
  EXPECT_EQ(a->packets().live(), 0u);

  b->deliver_inbound(a->outbox()[1].records, a->outbox()[1].packets);
  b->run_until(kNever);
  ASSERT_EQ(sb.arrived.size(), 3u);
  for (int i = 0; i < 3; ++i) expect_same(sent[2 - i], sb.arrived[i]);
  EXPECT_EQ(b->packets().live(), 0u);
}

TEST(PacketRecords, ABadBatchIsRefusedWholeAndTakesNothing) {
  auto a = half(0), b = half(1);
  Sink sa(*a, 0), sb(*b, 1);
  a->attach_node(0, &sa);
  b->attach_node(1, &sb);
  std::string good, bad_port;
  Packet p = full_packet();
  p.hop_dst = 1;
  append_record(p, good);
  append_record(p, good);
  p.hop_port = 3;
  bad_port = good;
  append_record(p, bad_port);
  EXPECT_THROW(b->deliver_inbound(good, 3), ProtocolError);  // fewer records than announced
  EXPECT_THROW(b->deliver_inbound(good, 1), ProtocolError);  // more
  EXPECT_THROW(b->deliver_inbound(bad_port, 3), ProtocolError);  // a port with no link
  EXPECT_EQ(b->packets().live(), 0u);
  EXPECT_EQ(b->next_event_time(), kNever);
  b->deliver_inbound(good, 2);
  b->run_until(kNever);
  EXPECT_EQ(sb.arrived.size(), 2u);
}

}  // namespace
}  // namespace cais
