#include "cais/packet_records.h"

#include <cstring>

#include "cais/errors.h"

namespace cais {

void append_record(const Packet& p, std::string& out) {
  RecordHead h;
  h.id = p.id;
  h.hop_key = p.hop_key;
  h.arrival_ps = p.arrival_ps;
  h.addr = p.addr;
  h.tag = p.tag;
  h.inject_ps = p.inject_ps;
  h.tail_ps = p.tail_ps;
  h.type = static_cast<std::uint32_t>(p.type);
  h.src = p.src;
  h.dst = p.dst;
  h.hop_dst = p.hop_dst;
  h.hop_port = p.hop_port;
  h.vc = p.vc;
  h.payload_bytes = p.payload_bytes;
  h.flits = p.flits;
  h.group = p.group;
  h.origin = p.origin;
  h.count = p.count;
  h.aux = p.aux;
  h.lines = p.lines;
  h.n_values = static_cast<std::uint32_t>(p.values.size());
  const std::size_t more = p.lines > 1 ? p.lines - 1 : 0;
  out.append(reinterpret_cast<const char*>(&h), sizeof h);  // appends: no zero-fill first
  if (more) out.append(reinterpret_cast<const char*>(p.more_lines.data()), 8 * more);
  if (!p.values.empty()) out.append(reinterpret_cast<const char*>(p.values.data()), 8 * p.values.size());
}

std::size_t read_record(const char* data, std::size_t size, Packet& out) {
  RecordHead h;
  if (size < sizeof h)
    throw ProtocolError("packet batch: a record is cut short (" + std::to_string(size) + " of " +
                        std::to_string(sizeof h) + " header bytes)");
  std::memcpy(&h, data, sizeof h);
  if (h.lines < 1 || h.lines > kMaxBulkLines)
    throw ProtocolError("packet batch: a record carries " + std::to_string(h.lines) + " lines (1 to " +
                        std::to_string(kMaxBulkLines) + " allowed)");
  const std::size_t more = h.lines - 1;
  if ((size - sizeof h) / 8 < more + h.n_values)
    throw ProtocolError("packet batch: a record's " + std::to_string(more) + " line addresses and " +
                        std::to_string(h.n_values) + " values run past the batch");
  out.id = h.id;
  out.hop_key = h.hop_key;
  out.arrival_ps = h.arrival_ps;
  out.addr = h.addr;
  out.tag = h.tag;
  out.inject_ps = h.inject_ps;
  out.tail_ps = h.tail_ps;
  out.type = static_cast<PacketType>(h.type);
  out.src = h.src;
  out.dst = h.dst;
  out.hop_dst = h.hop_dst;
  out.hop_port = h.hop_port;
  out.vc = h.vc;
  out.payload_bytes = h.payload_bytes;
  out.flits = h.flits;
  out.group = h.group;
  out.origin = h.origin;
  out.count = h.count;
  out.aux = h.aux;
  out.lines = h.lines;
  const char* r = data + sizeof h;
  std::memcpy(out.more_lines.data(), r, 8 * more);
  r += 8 * more;
  out.values.resize(h.n_values);
  if (h.n_values) std::memcpy(out.values.data(), r, 8 * std::size_t{h.n_values});
  return sizeof h + 8 * (more + h.n_values);
}

}  // namespace cais
