"""Where a ring AllReduce's link time goes in the NVSwitch engine, on 2, 4 and 8 GPUs.

One ISA ring all_reduce (harness/kernels/ring.py, validate_overlap's settings: flit-level switch,
24 channels, the SMs at the clock the power model gives a collective alone) of about --mib MiB per
GPU (default 32; the same bytes on every GPU count: whole 128 B lines, 8 per channel and part)
on hgx_h200_{N}gpu. Prints per GPU count: the data rate per
GPU (the bytes it sends, 2 (N-1)/N of the tensor, over the last GPU's end), GPU 0's link busy
fraction (port time over the run, and in the steady state: the median over GPU 0's ports and the
middle half of the run's 1 us bins of wire bytes over the port's rate), and the switch residence
of a packet (mean and p99, ns). On 2
GPUs each switch output takes one input; on 4 and 8 it takes the data of GPU g-1 and the write
acks of GPU g+1 (docs/VALIDATION.md, "GEMM + ring AllReduce").

  .venv/bin/python scripts/ring_switch_stats.py [--gpus 2,4,8] [--mib 32] [OVERRIDE ...]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

GPU_COUNTS = (2, 4, 8)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpus", default="2,4,8")
    ap.add_argument("--mib", type=float, default=32.0, help="all_reduce size per GPU, MiB")
    ap.add_argument("overrides", nargs="*", help="Hydra overrides (net.vc_depth_flits=4096, ...)")
    a = ap.parse_args(argv)
    from hydra import compose, initialize_config_dir

    from harness import CONF_DIR
    from harness.config.schema import register
    from harness.experiments.validate_overlap import ring_alone

    try:
        gpus = [int(x) for x in a.gpus.split(",")]
    except ValueError:
        gpus = []
    if not gpus or any(g not in GPU_COUNTS for g in gpus):
        print(f"ring_switch_stats: --gpus takes a comma-separated subset of {', '.join(map(str, GPU_COUNTS))}",
              file=sys.stderr)
        return 2
    if not a.mib > 0:
        print("ring_switch_stats: --mib takes a size above 0", file=sys.stderr)
        return 2
    register()
    print("gpus  GB/s per GPU  link busy %  steady busy %  switch residence mean / p99 ns")
    for g in gpus:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            cfg = compose(config_name="config",
                          overrides=["experiment=validate_overlap", f"system=hgx_h200_{g}gpu", *a.overrides])
        channels = int(cfg.collective.channels)
        lines = -(-int(a.mib * 2**20) // (channels * 128 * 8)) * 8  # per channel: 8 | lines, so every part is whole
        rate, s, series = ring_alone(cfg, channels * 128 * lines)
        end_ns = max(s[f"gpu{i}.kernel0.ar.end"] for i in range(g))
        ports = sorted({n.split(".")[1] for n in s if n.startswith("gpu0.port") and n.endswith(".tx.busy_ps")})
        busy = sum(s[f"gpu0.{p}.tx.busy_ps"] for p in ports) / len(ports) / 1e3 / end_ns
        steady = []
        for port, lanes in enumerate(cfg.system.lanes_per_switch):
            x = series[series.name == f"gpu0.port{port}.tx.wire_bytes"].sort_values("bin")
            util = x.value.to_numpy() / x.bin_ns.to_numpy() / (float(cfg.system.lane_bw_gbps) * lanes)
            steady.append(float(np.median(util[len(util) // 4: 3 * len(util) // 4])))
        print(f"{g:4d}  {rate:12.1f}  {100 * busy:11.1f}  {100 * float(np.median(steady)):13.1f}  "
              f"{s['sw0.residence.mean']:.1f} / {s['sw0.residence.p99']:.0f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
