// A strict reader of BookSim2-style network configs (`key = value;`, `//` comments), and the
// translation of the subset this engine supports into a Configure for the synthetic mode.
//
// Keys keep BookSim's names and defaults; a key BookSim knows but this engine does not model,
// an unknown key, or an unsupported value is an error naming the key. One cycle is one flit
// time on a channel; the translation uses 1 cycle = 1 ns (links of flit_bytes GB/s) and a
// one-cycle channel latency, as BookSim's fly network does.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "cosim.pb.h"

namespace cais::net {

struct BooksimValue {
  std::string text;                // as written (lists without braces)
  std::vector<std::string> items;  // list items ({a,b} or a single value)
  std::string where;               // "file:line" or "command line"; empty for a default
};

// BookSim's `traffic` value: a pattern name, with hotspot nodes from hotspot({{a,b}}) or,
// for the older spelling here, from hotspot_nodes = {a,b}.
struct BooksimTraffic {
  std::string pattern;
  std::vector<long> hotspots;
};

class BooksimConfig {
 public:
  // Parses a file; throws ConfigError naming the file and line, or the key.
  static BooksimConfig from_file(const std::string& path);
  static BooksimConfig from_string(const std::string& text, const std::string& origin = "<string>");
  // `key=value` override (as BookSim's command line).
  void set_override(const std::string& assignment);

  long get_int(const std::string& key) const;
  double get_double(const std::string& key) const;
  std::string get_string(const std::string& key) const;
  std::vector<long> get_int_list(const std::string& key) const;
  bool was_set(const std::string& key) const { return set_.count(key) != 0; }

  BooksimTraffic traffic() const;
  // Offered load in flits per node per cycle.
  double offered_flits() const;
  // The Configure for cais-net-synthetic: k terminals ("synthetic") on one k-port "nvswitch".
  proto::Configure to_configure() const;

 private:
  void assign(const std::string& key, const std::string& value, const std::string& where);
  std::map<std::string, BooksimValue> values_;  // defaults, then the file, then overrides
  std::map<std::string, bool> set_;
};

// Keys this reader accepts, with BookSim's defaults.
const std::map<std::string, std::string>& booksim_supported_keys();
// Keys accepted only at the values the engine models (others are errors naming key and values).
const std::map<std::string, std::vector<std::string>>& booksim_fixed_values();

}  // namespace cais::net
