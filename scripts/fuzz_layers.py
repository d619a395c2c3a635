"""Random layer runs with values: every scheme on the test models under random knobs, each run
functional (net.functional=true), so that it checks every collective's result on every GPU itself
(harness/functional_check.py).

Each point must finish (its self-check passed) or be refused with one line naming a key. A wrong
value, a deadlock, an internal error, an error of several lines or a run past the time limit is
a finding: its command line and message go to the findings file. Points are drawn from a seeded
generator, so `--seed S --runs N` repeats a campaign exactly.

    .venv/bin/python scripts/fuzz_layers.py --runs 200 --jobs 2 --seed 1 [--findings FILE]

`--collectives` draws single collectives instead (`workload=collective`: ring or NVLS, any op,
2-8 GPUs, sizes from 1 B, channels, bulk lines, SM counts), each checking its result itself.
`--partitions` runs every point three ways (the default process split, one GPU per engine
process, everything in one process); results.csv must be the same byte for byte.
"""
from __future__ import annotations

import argparse
import math
import random
import re
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness import schemes  # noqa: E402

CAIS = ("cais", "cais_partial", "cais_wo_coord", "cais_base")
FINDING_WORDS = ("internal error", "functional check", "deadlock", "Traceback", "no answer", "did not finish")
# A refusal names the key (scheme.channels, net.features, model, ...), from the harness or an engine.
REFUSAL = re.compile(r"cais-sim: error: (engine [\w, ]+: )?([a-z_]+(\.[a-z_0-9]+)*|[a-z_]+=\S+): ")


def draw(rng: random.Random) -> list[str]:
    """One point: a scheme, a test model, a phase and workload, and knobs at random."""
    scheme = rng.choice(schemes.available())
    phase = rng.choice(["inference", "training"])
    workloads = ["layer", "sublayer_l1", "sublayer_l2"] + (["sublayer_l3", "sublayer_l4"] if phase == "training" else [])
    # CAIS's pipeline with its group syncs (on in cais and cais_partial, drawn for cais_wo_coord)
    # deadlocks on 2-4 SMs, and on 8 with shards that are not whole tiles, as a GPU would
    # (docs/SCHEMES.md, asymmetric overlap)
    pipeline = scheme in ("cais", "cais_partial", "cais_wo_coord")
    sms = rng.choice([16, 33, 66] if pipeline else [3, 4, 8, 16, 33, 66, 66])
    gpus = rng.choice([2, 3, 4, 5, 6, 8, 8, 8])
    point = [f"scheme={scheme}", f"model={rng.choice(['tiny', 'tiny_edge'])}", f"phase={phase}",
             f"workload={rng.choice(workloads)}", "system=dgx_h100_half", f"system.gpus={gpus}",
             f"gpu.num_sms={sms}", f"model.num_sms={sms}",
             f"seed={rng.randrange(1000)}"]
    if 8 % gpus or rng.random() < 0.5:  # a shape of its own (the test models split over 2, 4 and 8 GPUs):
        # heads of 32 columns, a multiple of the GPUs; sequences not whole tiles; tokens that the GPUs divide
        heads = gpus * rng.choice([1, 2, 3])
        seq = rng.choice([64, 128, 192, 256, 320, 512])
        unit = seq * gpus // math.gcd(seq, gpus)
        batch = unit // seq * rng.randint(1, max(1, 3072 // unit))
        point += [f"model.heads={heads}", f"model.hidden={32 * heads}",
                  f"model.ffn_hidden={32 * heads * rng.choice([3, 4])}", f"model.seq_len={seq}", f"model.batch={batch}"]
    optional = {
        "gpu.bulk_lines": [1, 2, 4, 8, 16],
        "gpu.launch_skew_ns": [0, 2000, 50000],
        "net.internal_speedup": [1, 2],
        "net.vc_depth_flits": [160, 256, 512],
    }
    if scheme in CAIS or scheme == "t3_nvls":
        optional.update({"net.cais_merge.table_entries": [4, 16, 64, 320],
                         "net.cais_merge.timeout_ns": [100, 1000, 20000]})
    if scheme in ("cais", "cais_partial", "cais_wo_coord"):
        optional.update({f"scheme.{k}": ["true", "false"] for k in ("pre_launch_sync", "pre_access_sync", "throttle")})
    if scheme in ("coconet", "coconet_nvls"):
        optional.update({"scheme.chunks": [1, 2, 4, 8], "scheme.channels": [1, 2, 16]})
    if scheme in ("tp_nvls", "sp_nvls"):
        optional["scheme.channels"] = [1, 4, 16]
    if scheme in ("fuselib", "fuselib_nvls"):
        optional["scheme.reduce_threads"] = [32, 128, 1024]
    for key, values in optional.items():
        if rng.random() < 0.4:
            value = rng.choice(values)
            if key == "net.cais_merge.table_entries":
                point.append(f"net.cais_merge.table_bytes={128 * value}")
            point.append(f"{key}={value}")
    return point


def draw_collective(rng: random.Random) -> list[str]:
    """One collective as the kernel the schemes run, at a random size, GPU count and knobs."""
    algo = rng.choice(["ring", "ring", "nvls"])
    op = "all_reduce" if algo == "nvls" else rng.choice(["all_reduce", "all_gather", "reduce_scatter"])
    point = ["workload=collective", f"collective.algo={algo}", f"collective.op={op}",
             f"collective.bytes={rng.choice([1, 100, 4096, 65536, 1000000, 4 << 20, 3 * 10**6])}",
             "system=dgx_h100_half", f"system.gpus={rng.choice([2, 3, 4, 5, 6, 7, 8])}"]
    point += ["net.features=nvls"] if algo == "nvls" else []
    optional = {"collective.channels": [1, 2, 7, 16, 24, 32], "collective.nvls_channels": [1, 3, 8, 16],
                "gpu.bulk_lines": [1, 2, 8, 16], "gpu.num_sms": [4, 16, 66]}
    return point + [f"{k}={rng.choice(v)}" for k, v in optional.items() if rng.random() < 0.4]


# --partitions: the same point split differently over processes must give the same results.csv
PARTITIONS = (("cosim.gpus_per_process=1",), ("cosim.colocate=true",))


def run(point: list[str], timeout_s: float, partitions: bool = False) -> tuple[str, str, float]:
    """(verdict, message, seconds): ok | refused | finding."""
    rows = []
    t0 = time.monotonic()
    for split in ((),) + (PARTITIONS if partitions else ()):
        with tempfile.TemporaryDirectory(prefix="fuzz_layers.") as out:
            cmd = [str(ROOT / ".venv/bin/cais-sim"), *point, *split, "net.functional=true", "cache.enabled=false",
                   f"out_dir={out}"]
            try:
                p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout_s)
            except subprocess.TimeoutExpired:
                return "finding", f"no result within {timeout_s:g} s ({' '.join(split) or 'default split'})", \
                    time.monotonic() - t0
            if p.returncode:
                break
            rows.append((split, (Path(out) / "results.csv").read_text()))
    took = time.monotonic() - t0
    if p.returncode == 0:
        differ = [" ".join(split) for split, text in rows[1:] if text != rows[0][1]]
        if differ:
            return "finding", f"results.csv differs from the default split's with {', '.join(differ)}", took
        return "ok", "", took
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    message = lines[-1] if lines else f"exit {p.returncode} and no message"
    if len(lines) != 1 or any(w in p.stderr for w in FINDING_WORDS) or not REFUSAL.match(message):
        return "finding", "\n".join(lines[-6:]), took
    return "refused", message, took


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per run")
    ap.add_argument("--findings", type=Path, default=Path("fuzz_layers_findings.txt"))
    ap.add_argument("--collectives", action="store_true", help="single collectives instead of layers")
    ap.add_argument("--partitions", action="store_true",
                    help="run each point also with one GPU per engine process and colocated: results must agree")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    points = [(draw_collective if args.collectives else draw)(rng) for _ in range(args.runs)]
    counts = {"ok": 0, "refused": 0, "finding": 0}
    with ThreadPoolExecutor(args.jobs) as pool:
        for i, (point, (verdict, message, took)) in enumerate(
                zip(points, pool.map(lambda pt: run(pt, args.timeout, args.partitions), points))):
            counts[verdict] += 1
            print(f"{i:4d} {verdict:8s} {took:6.1f}s {' '.join(point)}" + (f"\n     {message}" if message else ""),
                  flush=True)
            if verdict == "finding":
                with args.findings.open("a") as f:
                    f.write(f"cais-sim {' '.join(point)} net.functional=true\n{message}\n\n")
    print(f"{args.runs} points: {counts['ok']} ran and checked, {counts['refused']} refused, "
          f"{counts['finding']} findings" + (f" (in {args.findings})" if counts["finding"] else ""))
    return 1 if counts["finding"] else 0


if __name__ == "__main__":
    sys.exit(main())
