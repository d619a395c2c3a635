"""cais-bench: measured speed of the co-simulation itself.

    cais-bench harness [--requests N] [--gap-ns G] [--repeat R]

`harness` runs 8 GPUs + 4 switches in 3 engine processes (2 GPU engines of 4 GPUs, 1 network
engine) with sparse traffic, so that the lock-step loop, not the models, dominates. It reports
the wall time per executed window, windows executed, and windows that idle-skipping saved.
"""
from __future__ import annotations

import argparse
import json
import statistics
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
        "loop_wall_s": best.loop_s,
        "repeats": repeat,
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="cais-bench", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="what", required=True)
    h = sub.add_parser("harness", help="harness cost per lock-step window with 3 engine processes")
    h.add_argument("--requests", type=int, default=2000, help="requests per GPU")
    h.add_argument("--gap-ns", type=float, default=400.0, help="gap between a GPU's requests")
    h.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    if args.what == "harness":
        out = bench_harness(args.requests, args.gap_ns, args.repeat)
    json.dump(out, sys.stdout, indent=2)
    print()


if __name__ == "__main__":
    main()
