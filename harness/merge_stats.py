"""A run's CAIS merge-unit summary from its statistics (stats.csv rows of
``<switch>.cais_merge.port<P>.<stat>``, registered by external/net feature_cais_merge.cc).

High-water marks are per table (a switch port's):
``merge_high_water_kb_max`` is the largest table any port needed, ``..._sum`` what all tables
needed together (the tables need not peak at once, so it bounds the total from above). The wait is
the time from the first to the last request of a merge entry (one address's session; an entry
evicted or timed out early ends its session there, so run with ``net.cais_merge.unlimited=true``
and a long ``timeout_ns`` to see whole per-address waits). The mean and maximum are exact; the
percentiles come from the fixed wait bins pooled over all tables, interpolated linearly within a
bin (the bins are 1-2-5 per decade from 10 ns to 100 us).
"""
from __future__ import annotations

import re

import numpy as np
import pandas as pd

_STAT = re.compile(r"sw\d+\.cais_merge(?:\.port\d+)?\.(.+)")
_BIN = re.compile(r"wait_bins\.(lt|ge)_(\d+)ns")
COUNTERS = ("hits", "misses", "evictions", "timeouts", "bypasses")


def _quantile(edges: list[float], counts: np.ndarray, q: float, wait_max: float) -> float:
    """q-quantile of waits counted per bin [edges[i-1], edges[i]) (first from 0, last to max)."""
    total = counts.sum()
    if total == 0:
        return 0.0
    lo_edges = [0.0] + edges
    hi_edges = edges + [max(wait_max, edges[-1])]
    target, seen = q * total, 0.0
    for lo, hi, n in zip(lo_edges, hi_edges, counts):
        if n and seen + n >= target:
            return lo + (hi - lo) * (target - seen) / n
        seen += n
    return hi_edges[-1]


def merge_summary(stats: pd.DataFrame) -> dict[str, float]:
    """Summary columns (see the module doc); empty when the run has no merge unit."""
    hw_bytes, hw_entries, waits_n, waits_sum, wait_max = [], [], 0.0, 0.0, 0.0
    totals = {c: 0 for c in COUNTERS}
    bins: dict[float, float] = {}
    found = False
    values = dict(zip(stats["name"], stats["value"]))
    for name, value in values.items():
        m = _STAT.fullmatch(name)
        if not m:
            continue
        found = True
        stat = m.group(1)
        if stat in totals:
            totals[stat] += int(value)
        elif stat == "high_water_bytes":
            hw_bytes.append(float(value))
        elif stat == "high_water_entries":
            hw_entries.append(float(value))
        elif stat == "wait.count":
            waits_n += float(value)
            key = name[: -len("count")] + "mean"
            waits_sum += float(value) * float(values.get(key, 0.0))
        elif stat == "wait.max":
            wait_max = max(wait_max, float(value))
        else:
            b = _BIN.fullmatch(stat)
            if b:
                edge = float(b.group(2)) * (1.0 if b.group(1) == "lt" else float("inf"))
                bins[edge] = bins.get(edge, 0.0) + float(value)
    if not found:
        return {}
    edges = sorted(e for e in bins if e != float("inf"))
    counts = np.array([bins[e] for e in edges] + [bins.get(float("inf"), 0.0)])
    out: dict[str, float] = {
        "merge_high_water_kb_max": round(max(hw_bytes, default=0.0) / 1024, 3),
        "merge_high_water_kb_sum": round(sum(hw_bytes) / 1024, 3),
        "merge_high_water_entries_max": int(max(hw_entries, default=0)),
        "merge_high_water_entries_sum": int(sum(hw_entries)),
    }
    out.update({f"merge_{c}": totals[c] for c in COUNTERS})
    out["merge_sessions"] = int(waits_n)
    out["wait_mean_us"] = round(waits_sum / waits_n / 1e3, 4) if waits_n else 0.0
    for q in (50, 90, 99):
        out[f"wait_p{q}_us"] = round(min(_quantile(edges, counts, q / 100, wait_max), wait_max) / 1e3, 4)
    out["wait_max_us"] = round(wait_max / 1e3, 4)
    return out

