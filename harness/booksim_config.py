"""Strict reader of BookSim2-style network configs (``key = value;``, ``//`` comments).

The same subset is read by the C++ main ``cais-net-synthetic`` (external/net/src/
booksim_config.cc), which gets the file itself; this reader validates a file before any run
(an unknown key, a BookSim option the engine does not model, or an unsupported value is a
ConfigError naming the key) and gives the harness the values it needs (injection rate, seed).
``cais-net-synthetic --keys`` prints the C++ list; a test keeps both in step.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from harness.errors import ConfigError

# Supported keys with BookSim2's defaults (sw_alloc_patience is ours: see harness/params/net.py).
SUPPORTED: dict[str, str] = {
    "topology": "fly",
    "k": "8",
    "n": "1",
    "routing_function": "dest_tag",
    "num_vcs": "16",
    "vc_buf_size": "8",
    "packet_size": "1",
    "traffic": "uniform",
    "hotspot_nodes": "{}",
    "injection_rate": "0.1",
    "injection_rate_uses_flits": "0",
    "injection_process": "bernoulli",
    "routing_delay": "1",
    "vc_alloc_delay": "1",
    "sw_alloc_delay": "1",
    "st_final_delay": "1",
    "credit_delay": "0",
    "vc_allocator": "separable_input_first",
    "sw_allocator": "separable_input_first",
    "seed": "0",
    "sample_period": "1000",
    "warmup_periods": "3",
    "max_samples": "10",
    "sim_type": "latency",
    "hold_switch_for_packet": "0",
    "wait_for_tail_credit": "0",
    "alloc_iters": "1",
    "input_speedup": "1",
    "output_speedup": "1",
    "internal_speedup": "1.0",
    "arb_type": "round_robin",
    "vc_busy_when_full": "0",
    "vc_prioritize_empty": "0",
    "speculative": "0",
    "noq": "0",
    "output_delay": "0",
    "st_prepare_delay": "0",
    "output_buffer_size": "-1",
    "router": "iq",
    "classes": "1",
    "priority": "none",
    "include_queuing": "1",
    "sim_count": "1",
    "use_read_write": "0",
    "subnets": "1",
    "latency_thres": "500.0",
    "warmup_thres": "0.05",
    "acc_warmup_thres": "0.05",
    "stopping_thres": "0.05",
    "acc_stopping_thres": "0.05",
    "perm_seed": "0",
    "deadlock_warn_timeout": "256",
    "print_activity": "0",
    "print_csv_results": "0",
    "watch_out": "",
    "stats_out": "",
    # The read/write request-reply scheme's keys: BookSim reads them only with use_read_write = 1,
    # which is not modelled, so any value of their type is accepted.
    "read_request_begin_vc": "0",
    "read_request_end_vc": "5",
    "write_request_begin_vc": "2",
    "write_request_end_vc": "7",
    "read_reply_begin_vc": "8",
    "read_reply_end_vc": "13",
    "write_reply_begin_vc": "10",
    "write_reply_end_vc": "15",
    "read_request_subnet": "0",
    "read_reply_subnet": "0",
    "write_request_subnet": "0",
    "write_reply_subnet": "0",
    "read_request_size": "1",
    "write_request_size": "1",
    "read_reply_size": "1",
    "write_reply_size": "1",
    "write_fraction": "0.5",
    "sw_alloc_patience": "2",
}

# BookSim2 options this engine knows of but does not model (an error says so, not "unknown").
UNSUPPORTED: frozenset[str] = frozenset({
    "c", "x", "y", "xr", "yr", "limit", "network_file", "use_noc_latency", "in_ports", "out_ports",
    "spec_check_elig", "spec_check_cred", "spec_mask_by_reqs", "vc_alloc_arb_type", "sw_alloc_arb_type",
    "batch_size",
    "batch_count", "max_outstanding_requests", "viewer_trace", "watch_file", "watch_packets", "watch_flits",
    "watch_transactions", "sim_power", "power_output_file", "tech_file", "channel_width", "channel_sweep",
    "num_vcs_sweep", "injection_rate_sweep", "deadlock_timeout", "link_failures", "fail_seed",
    "routing_table_file", "xy_routing", "burst_alpha", "burst_beta", "burst_r1", "packet_size_rate",
    "traffic_class",
})

# BookSim keys accepted only at the values the engine models (the same table as
# booksim_fixed_values() in external/net/src/booksim_config.cc).
FIXED: dict[str, tuple[str, ...]] = {
    "hold_switch_for_packet": ("0", "1"), "wait_for_tail_credit": ("0",), "alloc_iters": ("1",),
    "input_speedup": ("1",), "output_speedup": ("1",), "internal_speedup": ("1", "2", "3", "4"),
    "arb_type": ("round_robin",), "vc_busy_when_full": ("0",), "vc_prioritize_empty": ("0",),
    "speculative": ("0",), "noq": ("0",), "output_delay": ("0",), "st_prepare_delay": ("0",),
    "output_buffer_size": ("-1", "1", "2", "3", "4"), "router": ("iq",), "classes": ("1",), "priority": ("none",),
    "include_queuing": ("1",), "sim_count": ("1",), "use_read_write": ("0",), "subnets": ("1",),
    "print_activity": ("0",), "print_csv_results": ("0", "1"), "watch_out": ("", "-"), "stats_out": ("",),
}

# Values the engine supports for keys that name a model choice.
CHOICES: dict[str, tuple[str, ...]] = {
    "topology": ("fly",),
    "routing_function": ("dest_tag",),
    "traffic": ("uniform", "randperm", "hotspot"),
    "injection_process": ("bernoulli",),
    "vc_allocator": ("separable_input_first",),
    "sw_allocator": ("separable_input_first",),
    "sim_type": ("latency",),
}

def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


_INT_KEYS = ("perm_seed", "deadlock_warn_timeout", "k", "n", "num_vcs", "vc_buf_size", "packet_size", "injection_rate_uses_flits", "routing_delay",
             "vc_alloc_delay", "sw_alloc_delay", "st_final_delay", "credit_delay", "seed", "sample_period",
             "warmup_periods", "max_samples", "sw_alloc_patience",
             # the read/write scheme's (use_read_write = 0: unused, but of BookSim's type)
             "read_request_begin_vc", "read_request_end_vc", "write_request_begin_vc", "write_request_end_vc",
             "read_reply_begin_vc", "read_reply_end_vc", "write_reply_begin_vc", "write_reply_end_vc",
             "read_request_subnet", "read_reply_subnet", "write_request_subnet", "write_reply_subnet",
             "read_request_size", "write_request_size", "read_reply_size", "write_reply_size")


@dataclass
class BooksimConfig:
    path: str
    values: dict[str, str] = field(default_factory=dict)
    given: set[str] = field(default_factory=set)
    where: dict[str, str] = field(default_factory=dict)  # key -> "file:line" where it was set

    def int(self, key: str) -> int:
        text = self.values[key]
        if not re.fullmatch(r"[+-]?\d+", text):
            raise ConfigError(key, f"expected an integer, got '{text}' ({self.path})")
        return int(text)

    def float(self, key: str) -> float:
        try:
            return float(self.values[key])
        except ValueError:
            raise ConfigError(key, f"expected a number, got '{self.values[key]}' ({self.path})") from None

    def int_list(self, key: str) -> list[int]:
        text = self.values[key].strip()
        body = text[1:-1] if text.startswith("{") and text.endswith("}") else text
        items = [x.strip() for x in body.split(",") if x.strip()]
        if not all(re.fullmatch(r"[+-]?\d+", x) for x in items):
            raise ConfigError(key, f"expected a list of integers like {{0, 3}}, got '{text}' ({self.path})")
        return [int(x) for x in items]

    @property
    def injection_rate(self) -> float:
        return self.float("injection_rate")

    def offered_flits(self, rate: float | None = None) -> float:
        """Offered load in flits per node per cycle for `rate` in the file's units."""
        r = self.injection_rate if rate is None else rate
        return r if self.int("injection_rate_uses_flits") else r * self.int("packet_size")

    def traffic(self) -> tuple[str, list[int]]:
        """Pattern name and hotspot nodes: BookSim's hotspot({{0,1}}) (or hotspot({{0,1},{r,r}})
        with equal rates), or the older hotspot + hotspot_nodes = {0,1}."""
        text = self.values["traffic"].strip()
        if "(" not in text:
            return text, self.int_list("hotspot_nodes")
        m = re.fullmatch(r"hotspot\(\{\{([^{}]*)\}(?:,\s*\{([^{}]*)\})?\}\)", text.replace(" ", ""))
        if not m:
            raise ConfigError("traffic", f"'{text}': parameters are supported only as hotspot({{{{nodes}}}}) or "
                                         "hotspot({{nodes},{rates}})")
        nodes = [x for x in m.group(1).split(",") if x]
        rates = [x for x in (m.group(2) or "").split(",") if x]
        if not nodes or not all(re.fullmatch(r"[+-]?\d+", x) for x in nodes + rates):
            raise ConfigError("traffic", f"'{text}': expected lists of integers")
        if len(set(int(r) for r in rates)) > 1:
            raise ConfigError("traffic", f"'{text}': unequal hotspot rates are not supported (equal rates only)")
        return "hotspot", [int(x) for x in nodes]

    def validate(self) -> "BooksimConfig":
        for key, allowed in FIXED.items():
            value = self.values[key]
            if not any(value == a or (_number(value) is not None and _number(value) == _number(a)) for a in allowed):
                shown = ", ".join(a if a else '""' for a in allowed)
                raise ConfigError(key, f"{self._at(key)}'{value}' is not modelled (supported: {shown})")
        self._check_speedup()
        for key in ("latency_thres", "warmup_thres", "acc_warmup_thres", "stopping_thres", "acc_stopping_thres",
                    "write_fraction"):
            self.float(key)
        pattern, hot = self.traffic()
        for key, allowed in CHOICES.items():
            value = pattern if key == "traffic" else self.values[key]
            if value not in allowed:
                raise ConfigError(key, f"'{value}' is not supported (supported: {', '.join(allowed)})")
        for key in _INT_KEYS:
            self.int(key)
        if self.int("n") != 1:
            raise ConfigError("n", "only n = 1 (a single k-port router) is supported")
        for key in ("k", "num_vcs", "vc_buf_size", "packet_size", "sample_period", "max_samples"):
            if self.int(key) <= 0:
                raise ConfigError(key, f"must be > 0, got {self.int(key)}")
        if self.int("packet_size") > self.int("vc_buf_size"):
            raise ConfigError("packet_size", "larger than vc_buf_size (virtual cut-through needs room for a packet)")
        if self.int("injection_rate_uses_flits") not in (0, 1):
            raise ConfigError("injection_rate_uses_flits", "must be 0 or 1")
        k = self.int("k")
        if any(h < 0 or h >= k for h in hot):
            raise ConfigError("hotspot_nodes", f"must list terminals 0..{k - 1}, got {hot}")
        if pattern == "hotspot" and not hot:
            raise ConfigError("hotspot_nodes", "hotspot traffic needs hotspot_nodes = {...}")
        self.check_rate(self.injection_rate)
        return self

    def _at(self, key: str) -> str:
        """The place the key was set, as a message prefix ("fly.cfg:2: "); empty for a default."""
        return f"{self.where[key]}: " if key in self.where else ""

    def _check_speedup(self) -> None:
        """BookSim's internal_speedup S runs the router's stages S times per cycle: a 1-cycle stage
        takes 1/S cycle and an output buffers up to output_buffer_size flits for its link. The
        engine models 0- and 1-cycle stages and an output buffer of S flits (S = 1: BookSim's
        unbounded default, which never holds more than one); as booksim_config.cc."""
        speedup = round(self.float("internal_speedup"))
        out_buffer = round(self.float("output_buffer_size"))

        def refuse(key: str, supported: str) -> None:
            raise ConfigError(key, f"{self._at(key)}'{self.values[key]}' is not modelled with internal_speedup = {speedup} "
                                   f"(supported: {supported})")
        if speedup > 1:
            if self.int("hold_switch_for_packet"):  # the packet-level allocator has no internal speedup
                refuse("hold_switch_for_packet", "0")
            for key in ("routing_delay", "vc_alloc_delay", "sw_alloc_delay", "st_final_delay"):
                if self.int(key) > 1:
                    refuse(key, "0, 1")
            if out_buffer != speedup:
                refuse("output_buffer_size", f"{speedup}, the internal_speedup")
        elif out_buffer > 1:
            refuse("output_buffer_size", "-1, 1")

    def check_rate(self, rate: float) -> None:
        packets = rate / self.int("packet_size") if self.int("injection_rate_uses_flits") else rate
        if not 0 <= packets <= 1:
            raise ConfigError("injection_rate", f"{rate} gives {packets} packets per node per cycle; must be in [0, 1]")


def parse_text(text: str, origin: str = "<string>") -> BooksimConfig:
    cfg = BooksimConfig(path=origin, values=dict(SUPPORTED))
    lines = [line.split("//", 1)[0] for line in text.splitlines()]
    stmt, stmt_line = "", 1
    for number, line in enumerate(lines, start=1):
        for ch in line:
            if ch == ";":
                _assign(cfg, stmt.strip(), f"{origin}:{stmt_line}")
                stmt = ""
            else:
                if not stmt.strip() and not ch.isspace():
                    stmt_line = number
                stmt += ch
        stmt += " "
    if stmt.strip():
        raise ConfigError("", f"{origin}:{stmt_line}: missing ';' after '{stmt.strip()}'")
    return cfg


def _assign(cfg: BooksimConfig, stmt: str, where: str) -> None:
    if not stmt:
        return
    if "=" not in stmt:
        raise ConfigError("", f"{where}: expected 'key = value;', got '{stmt}'")
    key, value = (s.strip() for s in stmt.split("=", 1))
    if key in UNSUPPORTED:
        raise ConfigError(key, f"{where}: BookSim option not modelled by cais-net-synthetic; remove it "
                               "(`cais-net-synthetic --keys` lists the keys it reads)")
    if key not in SUPPORTED:
        raise ConfigError(key, f"{where}: unknown configuration key (supported: {', '.join(sorted(SUPPORTED))})")
    if len(value) >= 2 and value[0] == value[-1] == '"':
        value = value[1:-1]
    if value.count("{") != value.count("}"):
        raise ConfigError(key, f"{where}: unbalanced '{{' in '{value}'")
    cfg.values[key] = value
    cfg.given.add(key)
    cfg.where[key] = where


def load(path: str | Path) -> BooksimConfig:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError("net.booksim_config", f"cannot read '{p}': {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        line = p.read_bytes()[:exc.start].count(b"\n") + 1
        raise ConfigError("net.booksim_config", f"{p}:{line}: byte 0x{exc.object[exc.start]:02x} is not UTF-8 text; "
                          "allowed: a BookSim config in UTF-8 (ASCII)") from None
    return parse_text(text, str(p)).validate()
