#!/usr/bin/env python3
"""Our side of the BookSim2 acceptance sweep, diffed against BookSim2's recorded results.

    .venv/bin/python scripts/booksim_sweep.py                       # every row, 2 jobs
    .venv/bin/python scripts/booksim_sweep.py --only k=8 --jobs 1   # a subset
    .venv/bin/python scripts/booksim_sweep.py --write               # also record our columns
    .venv/bin/python scripts/booksim_sweep.py --data harness/data/validation/booksim_speedup2.csv
                                                                    # internal_speedup 2 (k = 8)

Each row of harness/data/validation/booksim_sweep.csv names a point (k, packet_size, traffic,
injection_rate in flits/node/cycle) and holds BookSim2's results on conf/booksim/fly8_uniform.cfg
with those overrides and sample_period=5000 (measured by hand, docs/VALIDATION.md). This script
runs build/external/cais-net-synthetic on the same file and overrides, prints one line per row
(BookSim2 latency, ours, the difference in %) and the mean and max absolute difference, and
exits 1 if any stable row differs by more than --tolerance percent. A data file may add the
columns internal_speedup and output_buffer_size, passed on as overrides (booksim_speedup2.csv). The CPU seconds of each run
(ours and, recorded, BookSim2's) give delivered flits per CPU-second for docs/PERFORMANCE.md.
"""
from __future__ import annotations

import argparse
import csv
import io
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "harness/data/validation/booksim_sweep.csv"
CONFIG = ROOT / "conf/booksim/fly8_uniform.cfg"
BINARY = ROOT / "build/external/cais-net-synthetic"
SAMPLE_PERIOD = 5000
OURS = ["cais_latency", "cais_accepted", "cais_stable", "err_pct", "cais_cpu_s", "cais_delivered_flits",
        "cais_flits_per_cpu_s", "booksim_flits_per_cpu_s", "speedup"]


# Router keys a data file may add as columns (harness/data/validation/booksim_speedup2.csv).
OPTIONAL = ("internal_speedup", "output_buffer_size")


def overrides(row: dict) -> list[str]:
    return [f"k={row['k']}", f"packet_size={row['packet_size']}", f"traffic={row['traffic']}",
            f"injection_rate={row['injection_rate']}", f"sample_period={SAMPLE_PERIOD}",
            *(f"{c}={row[c]}" for c in OPTIONAL if row.get(c))]


def run_timed(row: dict) -> dict:
    args = ["nice", "-n", "19", str(BINARY), str(CONFIG), *overrides(row)]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # Read the pipes to the end (stderr is short), then reap with wait4 for this child's CPU time.
    out = proc.stdout.read()
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"booksim_sweep: {' '.join(args[3:])}: exit {proc.returncode}: {err.strip()[-500:]}")
    r = next(csv.DictReader(io.StringIO(out)))
    cpu = usage.ru_utime + usage.ru_stime
    lat = float(r["avg_packet_latency_cycles"])
    stable = int(r["stable"])
    res = {"cais_latency": round(lat, 3), "cais_accepted": round(float(r["accepted_flits_per_node_cycle"]), 4),
           "cais_stable": stable, "cais_cpu_s": round(cpu, 3), "cais_delivered_flits": int(r["delivered_flits"])}
    res["cais_flits_per_cpu_s"] = round(res["cais_delivered_flits"] / max(cpu, 1e-3))
    bl = row.get("booksim_latency")
    res["err_pct"] = round(100.0 * (lat - float(bl)) / float(bl), 2) if bl and stable else ""
    # BookSim2 prints no flit total: offered load x terminals x simulated cycles (a stable run).
    bcpu, bcyc = float(row["booksim_cpu_s"] or 0), float(row["booksim_cycles"] or 0)
    bflits = float(row["injection_rate"]) * int(row["k"]) * bcyc
    res["booksim_flits_per_cpu_s"] = round(bflits / bcpu) if bcpu > 0 else ""
    res["speedup"] = round(res["cais_flits_per_cpu_s"] / res["booksim_flits_per_cpu_s"], 1) \
        if res["booksim_flits_per_cpu_s"] else ""
    return res


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--only", action="append", default=[], metavar="COLUMN=VALUE",
                    help="rows whose column equals the value (repeatable)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--tolerance", type=float, default=5.0, help="allowed |latency difference| in %%")
    ap.add_argument("--write", action="store_true", help="record our columns in the data file")
    a = ap.parse_args()
    if not BINARY.exists():
        print(f"booksim_sweep: {BINARY} is missing: run scripts/build_engines.sh", file=sys.stderr)
        return 2
    with open(a.data, newline="") as f:
        rows = list(csv.DictReader(f))
    base = [c for c in rows[0] if c not in OURS]
    sel = []
    for row in rows:
        ok = True
        for cond in a.only:
            col, _, val = cond.partition("=")
            if col not in row:
                print(f"booksim_sweep: --only {cond}: no column '{col}' (columns: {', '.join(base)})",
                      file=sys.stderr)
                return 2
            ok &= row[col] == val
        if ok:
            sel.append(row)
    with ThreadPoolExecutor(max(1, a.jobs)) as ex:
        results = list(ex.map(run_timed, sel))
    errs, bad = [], []
    print(f"{'k':>3} {'ps':>2} {'traffic':<22} {'rate':>8} {'booksim':>8} {'cais':>8} {'err%':>6} {'speedup':>7}")
    for row, res in zip(sel, results):
        row.update(res)
        e = res["err_pct"]
        if e != "":
            errs.append(abs(e))
            if abs(e) > a.tolerance:
                bad.append(row)
        print(f"{row['k']:>3} {row['packet_size']:>2} {row['traffic']:<22} {row['injection_rate']:>8} "
              f"{row['booksim_latency'] or 'unstable':>8} {res['cais_latency']:>8} {str(e):>6} {str(res['speedup']):>7}")
    if errs:
        print(f"rows {len(errs)}: mean |err| {sum(errs) / len(errs):.2f} %, max |err| {max(errs):.2f} %")
    if a.write:
        tmp = a.data.with_suffix(".tmp")
        with open(tmp, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=base + OURS)
            w.writeheader()
            for row in rows:
                w.writerow({c: row.get(c, "") for c in base + OURS})
        tmp.replace(a.data)
    if bad:
        print(f"{len(bad)} rows differ by more than {a.tolerance} %", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
