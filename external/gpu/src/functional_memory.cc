#include "cais/gpu/functional_memory.h"

#include <algorithm>
#include <cstring>

#include "cais/errors.h"
#include "cais/routing.h"

namespace cais::gpu {

FunctionalMemory::FunctionalMemory(const Workload& wl, bool enabled, std::string owner, std::uint32_t rank)
    : wl_(wl), enabled_(enabled), owner_(std::move(owner)) {
  if (enabled_)
    for (const auto& b : wl.buffers())
      mem_.emplace_back(b.b->bytes() / b.elem_bytes, b.b->init_rank() ? static_cast<double>(rank + 1) : 0.0);
}

void FunctionalMemory::out_of_range(std::uint32_t buffer, const char* what) const {
  throw InvariantError(owner_ + ": " + what + " past the end of buffer " + quote(wl_.buffers()[buffer].b->name()));
}

std::uint32_t FunctionalMemory::buffer_of(std::uint64_t heap_off) const {
  const auto& bufs = wl_.buffers();
  auto it = std::upper_bound(bufs.begin(), bufs.end(), heap_off,
                             [](std::uint64_t v, const DecodedBuffer& b) { return v < b.base; });
  if (it == bufs.begin()) throw InvariantError(owner_ + ": address outside every buffer");
  return static_cast<std::uint32_t>(it - bufs.begin() - 1);
}

void FunctionalMemory::apply_store(std::uint64_t addr, const std::vector<double>& values, bool accumulate) {
  const std::uint64_t off = addr & kOffsetMask;
  const std::uint32_t b = buffer_of(off);
  const auto& B = wl_.buffers()[b];
  std::uint64_t e = (off - B.base) / B.elem_bytes;
  auto& m = mem_[b];
  for (double v : values) {
    if (e >= m.size()) out_of_range(b, "store");
    m[e] = accumulate ? m[e] + v : v;
    ++e;
  }
}

void FunctionalMemory::read_values(std::uint64_t addr, std::uint32_t bytes, std::vector<double>& out) const {
  const std::uint64_t off = addr & kOffsetMask;
  const std::uint32_t b = buffer_of(off);
  const auto& B = wl_.buffers()[b];
  const std::uint64_t e0 = (off - B.base) / B.elem_bytes;
  out.clear();
  for (std::uint64_t e = e0; e < e0 + bytes / B.elem_bytes; ++e) {
    if (e >= mem_[b].size()) out_of_range(b, "load");
    out.push_back(mem_[b][e]);
  }
}

void FunctionalMemory::read_lines(const Packet& p, std::uint32_t bytes, std::vector<double>& out) const {
  if (p.lines == 1) return read_values(p.addr, bytes, out);
  const std::uint32_t line_bytes = bytes / p.lines;
  out.clear();
  for (std::uint32_t i = 0; i < p.lines; ++i) {
    const std::uint64_t off = p.line_addr(i) & kOffsetMask;
    const std::uint32_t b = buffer_of(off);
    const auto& B = wl_.buffers()[b];
    const std::uint64_t e0 = (off - B.base) / B.elem_bytes;
    for (std::uint64_t e = e0; e < e0 + line_bytes / B.elem_bytes; ++e) {
      if (e >= mem_[b].size()) out_of_range(b, "load");
      out.push_back(mem_[b][e]);
    }
  }
}

void FunctionalMemory::apply_lines(const Packet& p, bool accumulate) {
  if (p.lines == 1) return apply_store(p.addr, p.values, accumulate);
  const std::size_t per_line = p.values.size() / p.lines;
  for (std::uint32_t i = 0; i < p.lines; ++i) {
    const std::uint64_t off = p.line_addr(i) & kOffsetMask;
    const std::uint32_t b = buffer_of(off);
    const auto& B = wl_.buffers()[b];
    std::uint64_t e = (off - B.base) / B.elem_bytes;
    auto& m = mem_[b];
    for (std::size_t k = i * per_line; k < (i + 1) * per_line; ++k, ++e) {
      if (e >= m.size()) out_of_range(b, "store");
      m[e] = accumulate ? m[e] + p.values[k] : p.values[k];
    }
  }
}

void FunctionalMemory::fill(std::uint32_t buffer, std::uint64_t off, std::uint32_t rows, std::uint32_t row_bytes,
                            std::uint64_t stride, double value, bool accumulate) {
  const auto& B = wl_.buffers()[buffer];
  if (!stride) stride = row_bytes;
  for (std::uint32_t r = 0; r < rows; ++r)
    for (std::uint64_t x = 0; x < row_bytes; x += B.elem_bytes) {
      const std::uint64_t e = (off + r * stride + x) / B.elem_bytes;
      if (e >= mem_[buffer].size()) out_of_range(buffer, "store");
      mem_[buffer][e] = accumulate ? mem_[buffer][e] + value : value;
    }
}

void FunctionalMemory::load(std::uint32_t buffer, std::uint64_t off, std::uint32_t rows, std::uint32_t row_bytes,
                            std::uint64_t stride) {
  const auto& B = wl_.buffers()[buffer];
  if (!stride) stride = row_bytes;
  double s = 0;
  for (std::uint32_t r = 0; r < rows; ++r)
    for (std::uint64_t x = 0; x < row_bytes; x += B.elem_bytes) {
      const std::uint64_t e = (off + r * stride + x) / B.elem_bytes;
      if (e >= mem_[buffer].size()) out_of_range(buffer, "load");
      s += mem_[buffer][e];
    }
  ld_value_sum_ += s;
}

void FunctionalMemory::copy_rows(std::uint32_t src_buffer, std::uint64_t src_off, std::uint32_t dst_buffer,
                                 std::uint64_t dst_off, std::uint32_t rows, std::uint32_t row_bytes, std::uint64_t stride,
                                 bool accumulate) {
  const auto& S = wl_.buffers()[src_buffer];
  const auto& D = wl_.buffers()[dst_buffer];
  for (std::uint32_t r = 0; r < rows; ++r)
    for (std::uint64_t b = 0; b < row_bytes; b += D.elem_bytes) {
      const double v = mem_[src_buffer].at((src_off + r * stride + b) / S.elem_bytes);
      double& d = mem_[dst_buffer].at((dst_off + r * stride + b) / D.elem_bytes);
      d = accumulate ? d + v : v;
    }
}

void FunctionalMemory::read_tile(std::uint32_t buffer, std::uint64_t off, std::uint32_t rows, std::uint32_t row_bytes,
                                 std::uint64_t stride, std::vector<double>& out) const {
  const auto& B = wl_.buffers()[buffer];
  if (!stride) stride = row_bytes;
  out.clear();
  for (std::uint32_t r = 0; r < rows; ++r)
    for (std::uint64_t x = 0; x < row_bytes; x += B.elem_bytes) {
      const std::uint64_t e = (off + r * stride + x) / B.elem_bytes;
      if (e >= mem_[buffer].size()) out_of_range(buffer, "load");
      out.push_back(mem_[buffer][e]);
    }
}

void FunctionalMemory::write_tile(std::uint32_t buffer, std::uint64_t off, std::uint32_t rows, std::uint32_t row_bytes,
                                  std::uint64_t stride, const std::vector<double>& values, bool accumulate) {
  const auto& B = wl_.buffers()[buffer];
  if (!stride) stride = row_bytes;
  std::size_t i = 0;
  for (std::uint32_t r = 0; r < rows; ++r)
    for (std::uint64_t x = 0; x < row_bytes; x += B.elem_bytes, ++i) {
      const std::uint64_t e = (off + r * stride + x) / B.elem_bytes;
      if (e >= mem_[buffer].size()) out_of_range(buffer, "store");
      if (i >= values.size()) throw InvariantError(owner_ + ": a tile store with fewer values than elements");
      mem_[buffer][e] = accumulate ? mem_[buffer][e] + values[i] : values[i];
    }
}

void FunctionalMemory::set_value(std::uint32_t buffer, std::uint64_t elem, double v) {
  if (!enabled_) throw InvariantError(owner_ + ": memory values set in a workload that is not functional");
  mem_.at(buffer).at(elem) = v;
}

FunctionalMemory::Summary FunctionalMemory::summary(std::uint32_t buffer) const {
  Summary s;
  const auto& m = mem_.at(buffer);
  if (m.empty()) return s;
  s.min = s.max = m[0];
  std::uint64_t h = 0;
  for (std::size_t i = 0; i < m.size(); ++i) {
    const double v = m[i] == 0.0 ? 0.0 : m[i];  // -0 hashes as +0
    s.sum += v;
    s.min = std::min(s.min, v);
    s.max = std::max(s.max, v);
    std::uint64_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    h += mix64(bits + 0x9e3779b97f4a7c15ull * i);  // mix64 adds K once more: bits + K * (i + 1)
  }
  s.hash = static_cast<double>(h >> 12);
  return s;
}

double FunctionalMemory::value(std::uint32_t buffer, std::uint64_t elem) const {
  return enabled_ ? mem_.at(buffer).at(elem) : 0.0;
}

}  // namespace cais::gpu
