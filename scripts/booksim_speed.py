#!/usr/bin/env python3
"""Speed of the network engine against BookSim2 on the same configs, in one run.

    .venv/bin/python scripts/booksim_speed.py --booksim PATH/TO/booksim            # k 8..64, 1..9 flits
    .venv/bin/python scripts/booksim_speed.py --booksim B --k 8,64 --sizes 1,4 --repeat 3

For every (k, packet size) both simulators run conf/booksim/fly8_uniform.cfg with the same
overrides (traffic, injection_rate, and sample_period scaled as 5000 x 64 / k so that every k
simulates about the same number of flits), alternately, each under `nice -n NICE`. Delivered
flits: cais-net-synthetic's `delivered_flits`; BookSim2 prints no total, so its final
"Accepted flit rate average" x k x "Time taken" cycles. Each simulator's CPU time (user +
system, from wait4) and wall time give flits per CPU-second and per wall-second; the table
prints the medians over the repeats and the ratios cais / BookSim2. BookSim2 is not part of
this project: build it from its public source and pass its binary.
"""
from __future__ import annotations

import argparse
import csv
import io
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / "conf/booksim/fly8_uniform.cfg"
BINARY = ROOT / "build/external/cais-net-synthetic"


def run(args: list[str], nice: int, ok: tuple[int, ...] = (0,)) -> tuple[str, float, float]:
    """stdout, CPU seconds (user + system) and wall seconds of one run exiting with a code in `ok`."""
    t0 = time.monotonic()
    proc = subprocess.Popen(["nice", "-n", str(nice), *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.monotonic() - t0
    if os.waitstatus_to_exitcode(status) not in ok:
        raise SystemExit(f"booksim_speed: {' '.join(args)}: exit {os.waitstatus_to_exitcode(status)}: {out.strip()[-500:]}")
    return out, usage.ru_utime + usage.ru_stime, wall


def booksim_flits(out: str, k: int) -> float:
    cycles = re.findall(r"Time taken is (\d+) cycles", out)
    rate = re.findall(r"Accepted flit rate average = ([0-9.eE+-]+)", out)
    if not cycles or not rate:
        raise SystemExit("booksim_speed: BookSim2 printed no 'Time taken' / 'Accepted flit rate average' (unstable run?)")
    return float(rate[-1]) * k * int(cycles[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--booksim", type=Path, required=True, help="BookSim2 binary (src/booksim of its build)")
    ap.add_argument("--k", default="8,16,32,64", help="router sizes, comma-separated")
    ap.add_argument("--sizes", default="1,2,3,4,5,6,7,8,9", help="packet sizes in flits, comma-separated")
    ap.add_argument("--traffic", default="uniform")
    ap.add_argument("--rate", type=float, default=0.5, help="injection rate, flits per node per cycle")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--nice", type=int, default=5)
    ap.add_argument("--csv", type=Path, help="also write one row per run here")
    a = ap.parse_args()
    if not BINARY.exists():
        print(f"booksim_speed: {BINARY} is missing: run scripts/build_engines.sh", file=sys.stderr)
        return 2
    if not os.access(a.booksim, os.X_OK):
        print(f"booksim_speed: --booksim {a.booksim}: not an executable file", file=sys.stderr)
        return 2
    try:
        ks = [int(x) for x in a.k.split(",")]
        sizes = [int(x) for x in a.sizes.split(",")]
    except ValueError:
        print("booksim_speed: --k and --sizes take comma-separated integers", file=sys.stderr)
        return 2
    runs = []
    print(f"load average before: {os.getloadavg()[0]:.2f}", flush=True)
    print("| k | flits/packet | BookSim2 flits / CPU-s | cais flits / CPU-s | ratio (CPU) | BookSim2 flits / wall-s "
          "| cais flits / wall-s | ratio (wall) |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for k in ks:
        for size in sizes:
            over = [f"k={k}", f"packet_size={size}", f"traffic={a.traffic}", f"injection_rate={a.rate}",
                    f"sample_period={5000 * 64 // k}"]
            cell = {"b_cpu": [], "b_wall": [], "c_cpu": [], "c_wall": []}
            for rep in range(a.repeat):
                # BookSim2's main returns -1 (exit 255) when its simulation succeeded.
                bout, bcpu, bwall = run([str(a.booksim), str(CONFIG), *over], a.nice, ok=(0, 255))
                bfl = booksim_flits(bout, k)
                cout, ccpu, cwall = run([str(BINARY), str(CONFIG), *over], a.nice)
                cfl = float(next(csv.DictReader(io.StringIO(cout)))["delivered_flits"])
                cell["b_cpu"].append(bfl / max(bcpu, 1e-3))
                cell["b_wall"].append(bfl / bwall)
                cell["c_cpu"].append(cfl / max(ccpu, 1e-3))
                cell["c_wall"].append(cfl / cwall)
                runs.append({"k": k, "packet_size": size, "repeat": rep, "booksim_flits": round(bfl),
                             "booksim_cpu_s": round(bcpu, 3), "booksim_wall_s": round(bwall, 3),
                             "cais_flits": int(cfl), "cais_cpu_s": round(ccpu, 3), "cais_wall_s": round(cwall, 3)})
            m = {key: statistics.median(v) for key, v in cell.items()}
            print(f"| {k} | {size} | {m['b_cpu']:.3g} | {m['c_cpu']:.3g} | {m['c_cpu'] / m['b_cpu']:.1f}x "
                  f"| {m['b_wall']:.3g} | {m['c_wall']:.3g} | {m['c_wall'] / m['b_wall']:.1f}x |", flush=True)
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    if a.csv:
        tmp = a.csv.with_suffix(".tmp")
        with open(tmp, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(runs[0]))
            w.writeheader()
            w.writerows(runs)
        tmp.replace(a.csv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
