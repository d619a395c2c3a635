// Quoting user-supplied names (parameter keys, workload, kernel and buffer names, config values)
// in error messages: every byte that is not printable ASCII is written as an escape, so a name
// holding a newline or another control character can never turn a one-line error into several.
#pragma once
#include <string>
#include <string_view>

namespace cais {

// `s` with '\\', '\n', '\r', '\t' and every other byte outside 0x20..0x7e escaped (\xNN).
inline std::string escaped(std::string_view s) {
  static const char hex[] = "0123456789abcdef";
  std::string out;
  out.reserve(s.size());
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (c < 0x20 || c > 0x7e) {
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 0xf];
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

// `s` escaped and in single quotes: how an error names a user-supplied string. (Not "quoted":
// std::quoted would be found by argument-dependent lookup.)
inline std::string quote(std::string_view s) { return "'" + escaped(s) + "'"; }

}  // namespace cais
