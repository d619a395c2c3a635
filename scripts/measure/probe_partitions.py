#!/usr/bin/env python3
"""What an SM partition (green context) changes for cuBLAS GEMMs: two facts per partition.

1. Cluster capacity: cuOccupancyMaxActiveClusters for a one-block-per-SM kernel (120 KB of
   dynamic shared memory) with cluster sizes 1, 2, 4. A 2-CTA cluster needs two free SMs of one
   GPC, so a partition whose SMs are not paired within GPCs holds fewer clusters than SMs / 2.
2. cuBLAS's plan: for every GEMM shape of measure_kernels.py, the kernels torch.matmul launches
   (name, grid, block, cluster where the profiler reports it), recorded with torch.profiler.
   Tells whether cuBLAS sizes grids / split-K for the partition or for the whole device.

Partitions: the whole GPU (primary context), torch.cuda.green_contexts (co-scheduled, multiples
of 8 SMs) and driver-made ones without co-scheduling (measure_kernels.DriverGreenContext).

CSV outputs: <out>_clusters.csv (partition, api, num_sms, cluster_size, max_active_clusters)
and <out>_kernels.csv (partition, api, num_sms, name, M, N, K, kernel, grid, block, cluster,
calls). Usage (device): python3 scripts/measure/probe_partitions.py --out $OUT/h100_partitions
"""
from __future__ import annotations

import argparse
import csv
import ctypes as C
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import EXTRA_GEMM_SHAPES, enforce_no_multicast, model_gemm_shapes  # noqa: E402

enforce_no_multicast()

import torch  # noqa: E402

from measure_kernels import SMPartition, gemm_operands  # noqa: E402

LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION = 4
FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8
SMEM_BYTES = 120 * 1024  # more than half of an SM's 228 KB: one block per SM


class LaunchAttribute(C.Structure):
    _fields_ = [("id", C.c_uint), ("pad", C.c_char * 4), ("value", C.c_ubyte * 64)]


class LaunchConfig(C.Structure):
    _fields_ = [("gridDimX", C.c_uint), ("gridDimY", C.c_uint), ("gridDimZ", C.c_uint),
                ("blockDimX", C.c_uint), ("blockDimY", C.c_uint), ("blockDimZ", C.c_uint),
                ("sharedMemBytes", C.c_uint), ("hStream", C.c_void_p),
                ("attrs", C.POINTER(LaunchAttribute)), ("numAttrs", C.c_uint)]


_calls = 0


def max_active_clusters(cluster_size: int) -> int:
    """cuOccupancyMaxActiveClusters in the current context, for a fresh module loaded there."""
    import cupy as cp
    global _calls
    _calls += 1
    src = f"// probe {_calls}\n" + 'extern "C" __global__ void probe(int* x) { extern __shared__ int s[]; if (x) x[0] = s[0]; }'
    fn = cp.RawKernel(src, "probe").kernel  # loads the module in the current (green) context
    cu = C.CDLL("libcuda.so.1")
    rc = cu.cuFuncSetAttribute(C.c_void_p(fn.ptr), FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, SMEM_BYTES)
    if rc:
        raise RuntimeError(f"cuFuncSetAttribute failed: {rc}")
    attr = LaunchAttribute()
    attr.id = LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
    C.memmove(C.addressof(attr.value), (C.c_uint * 3)(cluster_size, 1, 1), 12)
    cfg = LaunchConfig(cluster_size * 1024, 1, 1, 128, 1, 1, SMEM_BYTES,
                       C.c_void_p(torch.cuda.current_stream().cuda_stream), C.pointer(attr), 1)
    n = C.c_int(-1)
    rc = cu.cuOccupancyMaxActiveClusters(C.byref(n), C.c_void_p(fn.ptr), C.byref(cfg))
    if rc:
        raise RuntimeError(f"cuOccupancyMaxActiveClusters failed: {rc}")
    return n.value


def cublas_kernels(M, N, K, layout):
    """Kernels of one torch.matmul (after a warm-up), as the profiler reports them."""
    from torch.profiler import ProfilerActivity, profile
    a, b = gemm_operands(M, N, K, layout, "cuda", torch.bfloat16)
    c = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
    torch.matmul(a, b, out=c)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        torch.matmul(a, b, out=c)
        torch.cuda.synchronize()
    out = []
    for ev in prof.events():
        if ev.device_type != torch.autograd.DeviceType.CUDA:
            continue
        extra = {}
        for key in ("grid", "block", "cluster"):
            v = getattr(ev, key, None)
            if v is None and hasattr(ev, "kwinputs"):
                v = ev.kwinputs.get(key)
            if v is not None:
                extra[key] = list(v) if not isinstance(v, (int, str)) else v
        out.append((ev.name, extra))
    if not any("grid" in e for _, e in out):  # fall back to the chrome trace, which carries grids
        path = f"/tmp/probe_trace_{os.getpid()}.json"
        prof.export_chrome_trace(path)
        out = []
        for e in json.load(open(path)).get("traceEvents", []):
            if e.get("cat") == "kernel":
                args = e.get("args", {})
                out.append((e["name"], {k: args[k] for k in ("grid", "block", "cluster") if k in args}))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="prefix of the two CSVs")
    ap.add_argument("--partitions", default="132:primary,64:torch,72:torch,64:driver,66:driver,72:driver",
                    help="comma list of num_sms:api (api primary|torch|driver)")
    args = ap.parse_args()
    full = torch.cuda.get_device_properties(0).multi_processor_count
    shapes = [(n, M, N, K, lay) for n, M, N, K, lay in model_gemm_shapes()]
    shapes += [(f"extra.{n}", M, N, K, "NN") for n, M, N, K in EXTRA_GEMM_SHAPES]
    fc = open(args.out + "_clusters.csv", "w", newline="")
    fk = open(args.out + "_kernels.csv", "w", newline="")
    wc = csv.writer(fc)
    wk = csv.writer(fk)
    wc.writerow(["partition", "api", "num_sms", "cluster_size", "max_active_clusters"])
    wk.writerow(["partition", "api", "num_sms", "name", "M", "N", "K", "kernel", "grid", "block", "cluster"])
    for spec in args.partitions.split(","):
        sms, api = spec.split(":")
        sms = int(sms)
        part = SMPartition(full if api == "primary" else sms, full, True, "driver" if api == "driver" else "torch")
        part.__enter__()
        try:
            for cs in (1, 2, 4):
                try:
                    n = max_active_clusters(cs)
                except Exception as e:  # noqa: BLE001
                    n = f"FAILED {type(e).__name__}: {e}"
                wc.writerow([spec, api, sms, cs, n])
                fc.flush()
                print(f"[{spec}] cluster {cs}: max active {n}", flush=True)
            for name, M, N, K, lay in shapes:
                try:
                    ks = cublas_kernels(M, N, K, lay)
                except Exception as e:  # noqa: BLE001
                    ks = [(f"FAILED {type(e).__name__}: {str(e)[:120]}", {})]
                    torch.cuda.synchronize()
                for kname, ex in ks:
                    wk.writerow([spec, api, sms, name, M, N, K, kname, ex.get("grid", ""), ex.get("block", ""),
                                 ex.get("cluster", "")])
                fk.flush()
                print(f"[{spec}] {name}: " + "; ".join(f"{k[:60]} grid={e.get('grid')}" for k, e in ks), flush=True)
        finally:
            part.__exit__(None, None, None)
    fc.close()
    fk.close()


if __name__ == "__main__":
    main()
