// Packets between engine processes: the `records` of a PacketBatch (proto/cosim.proto), one
// fixed-layout record per packet, copied rather than encoded.
//
// Why not a repeated protobuf message: encoding and decoding twenty varint fields per packet
// (and clearing and growing the messages) was about 15 % of a split layer run's CPU, where a
// record costs a copy. The batch stays a protobuf message (src, dst, how many packets); only its
// packets are records.
//
// A record, little-endian, 8-byte aligned fields:
//   RecordHead (112 bytes: the fixed fields of cais::PacketHead, then lines and n_values)
//   u64 x (lines - 1)   addresses of lines 1..lines-1 of a bulk packet (line 0 is addr)
//   f64 x n_values      functional payload
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "cais/packet.h"

namespace cais {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "packet records are little-endian and copied as such");

struct RecordHead {
  std::uint64_t id, hop_key, arrival_ps, addr, tag, inject_ps, tail_ps;
  std::uint32_t type, src, dst, hop_dst, hop_port, vc, payload_bytes, flits, group, origin, count, aux;
  std::uint32_t lines;     // 1..kMaxBulkLines
  std::uint32_t n_values;  // functional payload elements
};
static_assert(sizeof(RecordHead) == 112, "the record layout is part of the protocol");

// Appends p's record to `out`.
void append_record(const Packet& p, std::string& out);

// Decodes the record at data[0..size) into `out` (every field: a fresh or reused pool slot both
// work) and returns its length in bytes; throws ProtocolError naming what is wrong when the
// record is truncated or its lines are out of range.
std::size_t read_record(const char* data, std::size_t size, Packet& out);

}  // namespace cais
