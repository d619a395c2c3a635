#!/usr/bin/env python3
"""Fuzz the harness's parsers (docs/FUZZING.md): seeded mutations, one line of figures each.

    .venv/bin/python scripts/fuzz_parsers.py [TARGET ...] [--runs N] [--seed S] [--limit-s T]

TARGET: overrides, precheck, booksim, validate_csv (default: all but precheck). Exit 1 when an
input crashed (an exception other than a one-line ConfigError) or hung; the findings are printed.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness import fuzz  # noqa: E402
from harness.fuzz import overrides_target  # noqa: E402
from harness.fuzz.targets import all_targets  # noqa: E402


def main() -> int:
    targets = all_targets()
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("targets", nargs="*", choices=[[], *targets], default=[])
    ap.add_argument("--runs", type=int, default=10000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--limit-s", type=float, default=5.0, help="an input running longer is a hang")
    ap.add_argument("--chunk", type=int, default=100000,
                    help="print the running figures every CHUNK inputs (each chunk: the next seed)")
    args = ap.parse_args()
    names = args.targets or [n for n in targets if n != "precheck"]
    failed = False
    for name in names:
        total = fuzz.Report(name)
        done, chunk_seed = 0, args.seed
        while done < args.runs and not total.findings:
            part = fuzz.run(targets[name], min(args.chunk, args.runs - done), seed=chunk_seed, limit_s=args.limit_s)
            done += min(args.chunk, args.runs - done)
            chunk_seed += 1
            total.merge(part)
            print(total.line(), flush=True)
        if name == "overrides":
            print(overrides_target.stats_line(), flush=True)
        for f in total.findings:
            print(f"  FINDING {f}")
        failed |= bool(total.findings)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
