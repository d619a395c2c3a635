"""N CTAs writing to a peer GPU on the Hopper engine, beside the measured 2 x H200 rows.

The kernel is measure_p2p_ctas.py's (docs/MEASUREMENTS.md "NVLink writes from N CTAs"): each of
N CTAs of 480 threads walks its share in steps of 480 x 4 x 16 B = 30 KiB: the step's loads from
local memory (4 loads of 16 B per thread in flight), a wait for them, then the same bytes stored to
the peer (fire-and-forget). `one`: GPU 0 writes to GPU 1; `both`: each writes to the other. The
system is hgx_h200_2gpu with validate_collectives' settings (128 B packets), its SMs at the clock
the power model predicts for N busy SMs (harness/gpu/power.py: the maximum boost, 1980 MHz, for
N <= 16; `gpu.clock_mhz=F` fixes another); nothing is fitted to these rows. Prints and writes (with --out) ctas, mode, sim GB/s per direction, measured GB/s
per direction (harness/data/measured/h200x2_p2p_ctas.csv, mode raw) and the error.

  .venv/bin/python scripts/p2p_ctas.py --ctas 1,2,4,8,16 --mode one [--mib-per-cta 2] [OVERRIDE ...]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd
from omegaconf import OmegaConf

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness import REPO_ROOT  # noqa: E402
from harness.gpu.isa_text import isa  # noqa: E402
from harness.gpu.kernels import affine  # noqa: E402
from harness.kernels.builder import WorkloadBuilder  # noqa: E402

MEASURED = REPO_ROOT / "harness" / "data" / "measured" / "h200x2_p2p_ctas.csv"
THREADS, LOADS_PER_THREAD, VEC = 480, 4, 16
STEP = THREADS * LOADS_PER_THREAD * VEC  # bytes one CTA has in flight per step


def workload(ctas: int, bytes_per_cta: int, num_sms: int, both: bool) -> tuple[bytes, int]:
    """The copy kernel on both GPUs; with `both` false GPU 1's CTAs move nothing (zero steps)."""
    steps = max(1, bytes_per_cta // STEP)
    per_cta = steps * STEP
    b = WorkloadBuilder("p2p_ctas", 2, num_sms)
    src = b.buffer("src", per_cta * ctas)
    dst = b.buffer("dst", per_cta * ctas)
    k, p = b.kernel("p2p_copy", ctas, threads=THREADS, regs=32, loads_via_l1=True)
    addr = affine(0, bx=per_cta, loops=(STEP,))
    # GPU g sends to 1 - g; in `one` mode GPU 1's rows are zero bytes long (nothing moves)
    p.loop(steps)
    p.ins(isa.LD, is_async=True, buffer=src, addr=addr, rows=1, row_bytes=STEP)
    p.ins(isa.WAIT, scope=isa.LOCAL)  # the step's loads; the previous step's stores stay in flight
    p.ins(isa.ST_REMOTE, is_async=True, buffer=dst, addr=affine(0, bx=per_cta, loops=(STEP,)),
          peer=affine(1, g=-1), rows=1, row_bytes=STEP)
    p.end()
    la = b.launch(k, b.stream("main"))
    if not both:
        b.wl.launches[la].gpus.append(0)
    return b.wl.SerializeToString(), per_cta


def simulate_point(cfg, ctas: int, bytes_per_cta: int, both: bool, fixed_clock: bool = False) -> float:
    """GB/s per direction: the sending GPUs' bytes over the kernel's span on the first sender."""
    from harness import topology as topo_mod
    from harness.cosim import simulate
    from harness.experiments.validate_collectives import row_gpu, row_system
    from harness.system import cosim_options, engine_params

    row = pd.Series({"gpus": 2, "system": "hgx_h200_2gpu"})
    system = row_system(cfg, row)
    cfg = row_gpu(cfg, "hgx_h200_2gpu")  # H200s (their HBM, latency), as measured
    if not fixed_clock:  # N CTAs keep N SMs busy: far below the power limit
        from harness.gpu import power

        cfg = OmegaConf.merge(cfg, {"gpu": {"clock_mhz": power.settled_clock_mhz(ctas, "memory", cfg.gpu)}})
    params = engine_params(cfg)
    params["host.gpu_model"] = "hopper"
    params["host.switch_model"] = cfg.system.switch_model
    wl, per_cta = workload(ctas, bytes_per_cta, int(cfg.gpu.num_sms), both)
    res = simulate(topo_mod.build(system), params, seed=int(cfg.seed), workload=wl, **cosim_options(cfg))
    st = res.stats.set_index("name")["value"]
    start = st["gpu0.kernel0.p2p_copy.start"]
    end = st["gpu0.kernel0.p2p_copy.end"]
    return ctas * per_cta / (end - start)  # B/ns = GB/s


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ctas", default="1,2,4,8,16")
    ap.add_argument("--mode", choices=("one", "both"), default="one")
    ap.add_argument("--mib-per-cta", type=float, default=2.0)
    ap.add_argument("--out", default="")
    ap.add_argument("overrides", nargs="*", help="Hydra overrides (gpu.posted_stores=false, ...)")
    a = ap.parse_args(argv)
    from hydra import compose, initialize_config_dir

    from harness import CONF_DIR
    from harness.config.schema import register

    register()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose(config_name="config", overrides=["experiment=validate_collectives", *a.overrides])
    measured = pd.read_csv(MEASURED)
    measured = measured[(measured["mode"] == "raw") & (measured["direction"] == a.mode)].set_index("ctas")
    rows = []
    for n in (int(x) for x in a.ctas.split(",")):
        fixed = any(o.startswith("gpu.clock_mhz=") for o in a.overrides)
        sim = simulate_point(cfg, n, int(a.mib_per_cta * 2**20), a.mode == "both", fixed)
        meas = float(measured.loc[n, "total_GBps"]) / (2 if a.mode == "both" else 1) if n in measured.index else float("nan")
        rows.append({"ctas": n, "mode": a.mode, "sim_GBps": round(sim, 1), "measured_GBps": meas,
                     "err_pct": round(100 * (sim - meas) / meas, 1)})
        print(rows[-1], flush=True)
    df = pd.DataFrame(rows)
    print(df.to_string(index=False))
    if a.out:
        df.to_csv(a.out, index=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
