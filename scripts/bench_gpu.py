#!/usr/bin/env python3
"""Speed of the GPU engine: simulated thread blocks and events per second of wall time.

Workloads (LLaMA-7B, CAIS Table I half scale: hidden 4096, FFN 11264, 3 x 3072 tokens, TP=8):
  ffn_local  every one of 8 GPUs runs its FFN GEMMs (FC1 9216x1408x4096 then FC2
             9216x4096x1408) on local memory: the engine's compute/memory path only;
  ag_ffn     FC1 as an all-gather GEMM through the DGX-H100 network (4 NVSwitches): A rows are
             sharded over the GPUs and read with ld.cais (CAIS merge unit and group sync on) or
             plain remote loads; tokens reduced (--ag-tokens) so one run stays short.
Everything runs in one process on the standalone main (cais-gpu-standalone hosts the GPUs and
the switches of the Configure), so wall time is engine time, without the harness in the loop.

Usage: CAIS_ENGINE_DIR=build/h5 python scripts/bench_gpu.py [--repeat 3] [--ag-tokens 1024]
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from harness import topology  # noqa: E402
from harness.gpu import ag_gemm, kernels, standalone  # noqa: E402
from harness.protocol import cosim as pb  # noqa: E402
from harness.system import engine_params  # noqa: E402


def ffn_local(gpus: int = 8, sms: int = 132):
    wl = kernels.new_workload("llama7b_ffn_local", gpus)
    for name, (M, N, K) in (("fc1", (9216, 1408, 4096)), ("fc2", (9216, 4096, 1408))):
        g = kernels.gemm(M, N, K, sms)
        base = len(wl.buffers)
        for b in g.buffers:
            wl.buffers.add().CopyFrom(b)
        kbase = len(wl.kernels)
        for k in g.kernels:
            kk = wl.kernels.add()
            kk.CopyFrom(k)
            kk.name = f"{name}_{k.name}"
            for ins in kk.program:
                if ins.op not in (kernels.isa.MMA, kernels.isa.ALU, kernels.isa.LOOP, kernels.isa.ENDLOOP,
                                  kernels.isa.WAIT, kernels.isa.BAR):
                    ins.buffer += base
        lbase = len(wl.launches)
        for la in g.launches:
            n = wl.launches.add()
            n.CopyFrom(la)
            n.kernel += kbase
            n.stream = 0 if name == "fc1" and la.stream == 0 else n.stream + (0 if name == "fc1" else 16)
            del n.after[:]
            n.after.extend(a + lbase for a in la.after)
            for d in n.deps:
                d.producer += lbase
    return wl


def configure_system(wl, system: str, features: str) -> "pb.Configure":
    from conftest import compose
    cfg = compose(f"system={system}", "system.gpu_model=hopper", f"net.features='{features}'")
    topo = topology.build(cfg.system)
    params = engine_params(cfg)
    params["gpu.launch_skew_ns"] = 0.0
    params["gpu.clock_spread_frac"] = 0.0
    c = standalone.configure(wl, params, num_gpus=0)
    c.topology.CopyFrom(topo)
    del c.hosted_nodes[:]
    del c.node_engine[:]
    for n in topo.nodes:
        c.hosted_nodes.append(n.id)
        c.node_engine.append(0)
    return c


def run_cfg(cfg, exe) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as d:
        cp, sp = Path(d) / "c.pb", Path(d) / "s.pb"
        cp.write_bytes(cfg.SerializeToString())
        t0 = time.perf_counter()
        r = subprocess.run([str(exe), str(cp), str(sp)], capture_output=True, text=True)
        wall = time.perf_counter() - t0
        if r.returncode:
            raise SystemExit(r.stderr)
        st = pb.Stats()
        st.ParseFromString(sp.read_bytes())
    out = {s.name: s.value for s in st.stats}
    out["process_wall_s"] = wall
    return out


def report(name: str, runs: list[dict[str, float]]) -> dict:
    best = min(runs, key=lambda r: r["engine.wall_time"])
    tbs = sum(v for k, v in best.items() if k.endswith(".tbs_completed"))
    ev = best["engine.events"]
    w = best["engine.wall_time"]
    row = dict(workload=name, sim_us=best["engine.end_time"] / 1e6, tbs=int(tbs), events=int(ev), wall_s=round(w, 3),
               tbs_per_s=round(tbs / w), events_per_s=round(ev / w),
               nvlink_payload_MB=round(sum(v for k, v in best.items() if ".tx." in k and k.endswith(".bytes")
                                           and k.startswith("gpu")) / 1e6, 1))
    print(" ".join(f"{k}={v}" for k, v in row.items()), flush=True)
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--ag-tokens", type=int, default=1024)
    args = ap.parse_args()
    exe = standalone.binary()
    rows = []
    wl = ffn_local()
    cfg = standalone.configure(wl, standalone.gpu_params({"launch_skew_ns": 0.0, "clock_spread_frac": 0.0}), num_gpus=8)
    rows.append(report("ffn_local_8gpu", [run_cfg(cfg, exe) for _ in range(args.repeat)]))
    for mode, feats in (("cais", "group_sync,cais_merge"), ("remote", "")):
        wl = ag_gemm.ag_gemm(args.ag_tokens, 1408, 4096, 8, mode=mode)
        cfg = configure_system(wl, "dgx_h100", feats)
        rows.append(report(f"ag_fc1_{mode}_{args.ag_tokens}tok_dgx", [run_cfg(cfg, exe) for _ in range(args.repeat)]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
