#!/usr/bin/env python3
"""What the GPU launched for PyTorch's layernorm (forward and backward, bf16): kernel names,
grid, block, registers per thread, shared memory and the occupancy CUPTI reports, from a
torch.profiler trace. These are what the engine's layernorm programs take as given (threads
and registers per block decide how many blocks an SM holds, and so how many loads are in flight).

CSV: name,M,N,pass,kernel,grid,block,regs,smem,blocks_per_sm,warps_per_sm,occupancy_pct,dur_us,gpu

Usage (device, one GPU): python3 scripts/measure/measure_kernel_resources.py --out $OUT/h100_layernorm_resources.csv
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import MODELS, CsvOut, enforce_no_multicast  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    enforce_no_multicast()
    import torch
    import torch.nn.functional as F

    gpu = torch.cuda.get_device_name(0)
    out = CsvOut(args.out, ["name", "M", "N", "pass", "kernel", "grid", "block", "regs", "smem", "blocks_per_sm",
                            "warps_per_sm", "occupancy_pct", "dur_us", "gpu"])
    for name, h, _ffn, _heads, seq, batch in MODELS:
        M, N = seq * batch, h
        x = torch.randn(M, N, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        w = torch.randn(N, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        b = torch.randn(N, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        dy = torch.randn(M, N, device="cuda", dtype=torch.bfloat16)
        for _ in range(3):  # warm-up
            F.layer_norm(x, (N,), w, b).backward(dy)
        torch.cuda.synchronize()
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            y = F.layer_norm(x, (N,), w, b)
            torch.cuda.synchronize()
            y.backward(dy)
            torch.cuda.synchronize()
        with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
            path = f.name
        prof.export_chrome_trace(path)
        with open(path) as f:
            evs = [e for e in json.load(f).get("traceEvents", []) if e.get("cat") == "kernel"]
        os.unlink(path)
        fwd_end = None
        for e in sorted(evs, key=lambda e: e["ts"]):
            a = e.get("args", {})
            if fwd_end is None:
                fwd_end = e["ts"] + e["dur"]
            out.row(**{"name": name, "M": M, "N": N, "pass": "forward" if e["ts"] < fwd_end else "backward",
                       "kernel": e["name"][:160], "grid": str(a.get("grid", "")), "block": str(a.get("block", "")),
                       "regs": a.get("registers per thread", ""), "smem": a.get("shared memory", ""),
                       "blocks_per_sm": a.get("blocks per SM", ""), "warps_per_sm": a.get("warps per SM", ""),
                       "occupancy_pct": a.get("est. achieved occupancy %", ""), "dur_us": e["dur"], "gpu": gpu})
            print(name, e["name"][:90], a.get("grid"), a.get("block"), a.get("registers per thread"),
                  a.get("shared memory"), a.get("est. achieved occupancy %"), e["dur"], flush=True)
    out.close()


if __name__ == "__main__":
    main()
