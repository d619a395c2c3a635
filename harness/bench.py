"""cais-bench: measured speed of the co-simulation itself.

    cais-bench harness [--requests N] [--gap-ns G] [--repeat R]
    cais-bench floor [--windows N] [--transport ipc|tcp]
    cais-bench os-floor

`harness` runs 8 GPUs + 4 switches in 3 engine processes (2 GPU engines of 4 GPUs, 1 network
engine) with sparse traffic, so that the lock-step loop, not the models, dominates. It reports
the wall time per executed window, windows executed, and windows that idle-skipping saved.
"""
from __future__ import annotations

import argparse
import json
import statistics
import time
import sys

from harness.config.schema import register


def _compose(overrides: list[str]):
    from hydra import compose, initialize_config_dir

    from harness import CONF_DIR

    register()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose(config_name="config", overrides=overrides)


def bench_harness(requests: int, gap_ns: float, repeat: int) -> dict:
    from harness.system import run_system

    cfg = _compose([f"traffic.requests_per_gpu={requests}", f"traffic.issue_gap_ns={gap_ns}",
                    "traffic.max_outstanding=4", "cosim.gpus_per_process=4", "cosim.switches_per_process=4"])
    runs = []
    for _ in range(repeat):
        r = run_system(cfg)
        runs.append(r)
    per_window = [r.loop_s / r.windows * 1e6 for r in runs]
    best = runs[per_window.index(min(per_window))]
    return {
        "engine_processes": len(best.engines),
        "window_ns": best.window_ps / 1000,
        "simulated_us": best.end_ps / 1e6,
        "windows_executed": best.windows,
        "windows_skipped_by_idle_jump": best.windows_skipped,
        "us_per_window_median": statistics.median(per_window),
        "us_per_window_min": min(per_window),
        "harness_cpu_us_per_window": best.loop_cpu_s / best.windows * 1e6,
        "loop_wall_s": best.loop_s,
        "repeats": repeat,
    }


def bench_floor(windows: int, engines: int = 3, transport: str = "ipc") -> dict:
    """The protocol's own floor: engines that host nothing, advanced window after window."""
    from harness.cosim import launch
    from harness.protocol import cosim as pb

    names = [f"empty{i}" for i in range(engines)]
    with launch(names, transport=transport) as coord:
        configures = []
        for i, name in enumerate(names):
            c = pb.Control()
            c.configure.engine_name = name
            c.configure.engine_index = i
            c.configure.window_ps = 250_000
            configures.append(c)
        coord.configure(configures)
        adv = pb.Control()
        t0, c0 = time.perf_counter(), time.process_time()
        for w in range(windows):
            adv.advance.until_ps = (w + 1) * 250_000
            data = adv.SerializeToString()
            for i in range(engines):
                coord.send(i, data)
            coord.gather("window_done", list(range(engines)))
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {"engine_processes": engines, "transport": transport, "windows": windows, "us_per_window": wall / windows * 1e6,
            "harness_cpu_us_per_window": cpu / windows * 1e6}


def bench_pipe(rounds: int = 5000, same_core: bool = False) -> dict:
    """The operating system's floor: a one-byte ping-pong between two processes over pipes."""
    import os

    r1, w1 = os.pipe()
    r2, w2 = os.pipe()
    if same_core:
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    pid = os.fork()
    if pid == 0:  # child: echo until told to stop
        while (data := os.read(r1, 1)) != b"q":
            os.write(w2, data)
        os._exit(0)
    t0 = time.perf_counter()
    for _ in range(rounds):
        os.write(w1, b"x")
        os.read(r2, 1)
    us = (time.perf_counter() - t0) / rounds * 1e6
    os.write(w1, b"q")
    os.waitpid(pid, 0)
    return {"pipe_round_trip_us": us, "same_core": same_core, "rounds": rounds}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="cais-bench", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="what", required=True)
    h = sub.add_parser("harness", help="harness cost per lock-step window with 3 engine processes")
    h.add_argument("--requests", type=int, default=2000, help="requests per GPU")
    h.add_argument("--gap-ns", type=float, default=2000.0, help="gap between two requests of one GPU")
    h.add_argument("--repeat", type=int, default=3)
    f = sub.add_parser("floor", help="protocol floor: round trips to engines that host nothing")
    f.add_argument("--windows", type=int, default=3000)
    f.add_argument("--transport", choices=["ipc", "tcp"], default="ipc")
    sub.add_parser("os-floor", help="pipe ping-pong between two processes (two cores, then one)")
    args = ap.parse_args(argv)
    if args.what == "os-floor":
        out = {"two_cores": bench_pipe(), "one_core": bench_pipe(same_core=True)}
    elif args.what == "harness":
        out = bench_harness(args.requests, args.gap_ns, args.repeat)
        out["protocol_floor"] = bench_floor(3000)
    else:
        out = bench_floor(args.windows, transport=args.transport)
    json.dump(out, sys.stdout, indent=2)
    print()


if __name__ == "__main__":
    main()
