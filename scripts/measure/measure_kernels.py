#!/usr/bin/env python3
"""Measure single-GPU kernels (bf16 GEMM, layernorm, attention) at full and half SM count.

What it measures
  * bf16 GEMM via torch.matmul (cuBLAS) for the CAIS paper's TP=8 layer GEMMs (QKV, attention
    out-proj, FC1, FC2; forward, dgrad, wgrad) of mega_gpt_4b, mega_gpt_8b, llama_7b (half
    setup) and llama_7b_full, plus extra square / odd / skinny shapes.
    Row convention (M,N,K): [M,K] x [K,N]; tflops = 2*M*N*K / time.
    Operand layouts mimic Megatron: fwd X @ W^T (W stored [N,K], "NT"), dgrad dY @ W ("NN"),
    wgrad X^T @ dY (X stored [T,K_fwd], "TN"); extra shapes are "NN".
  * layernorm: F.layer_norm bf16 [M=T rows, N=h] with bf16 weight+bias (K=0); the notes column
    gives GB/s counting one read of the input and one write of the output.
  * attention: F.scaled_dot_product_attention bf16 causal, q/k/v [batch, heads/8, seq, d]
    (M=batch*heads/8, N=seq, K=d). tflops counts 4*M*N*N*K/2 (causal half of QK^T and PV).
  * each at num_sms=132 (whole GPU, primary context) and num_sms=66 through a CUDA green context
    (torch.cuda.green_contexts.GreenContext). The SM count actually used inside the green
    context is verified by a kernel that records %smid of many blocks (Triton, else CuPy);
    the result goes to the log and the notes column. A failing green context is recorded as
    failed rows (measured_us empty) and in the log; it never falls back silently.

Timing: CUDA events around each run; a _sleep kernel is queued first so the host stays ahead
of the GPU; `--warmup` untimed runs, then the median of >= `--min-iters` timed runs (more for
small shapes, up to ~`--target-ms` of GPU time). Inputs are random (never zeros) and rotated
among several input sets when one set would fit in L2, so the numbers are for cold-L2 operands.

CSV columns: name,kind,M,N,K,num_sms,measured_us,tflops,gpu,torch_version,iters,notes
Usage (device): python3 scripts/measure/measure_kernels.py --out $OUT/h100_kernels.csv
Usage (CPU logic check): python3 scripts/measure/measure_kernels.py --cpu-smoke --out /tmp/k.csv
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import (EXTRA_GEMM_SHAPES, MODELS, CsvOut, enforce_no_multicast,  # noqa: E402
                    median, model_gemm_shapes)

enforce_no_multicast()

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

COLUMNS = ["name", "kind", "M", "N", "K", "num_sms", "measured_us", "tflops", "gpu",
           "torch_version", "iters", "notes", "sm_clock_mhz"]
L2_ROTATE_BYTES = 256 << 20  # rotate input sets until at least this many bytes are touched


def log(*a):
    print(*a, flush=True)


class Bench:
    def __init__(self, cuda: bool, warmup: int, min_iters: int, max_iters: int, target_ms: float):
        self.cuda = cuda
        self.warmup = warmup
        self.min_iters = min_iters
        self.max_iters = max_iters
        self.target_ms = target_ms
        self.last_clock_mhz = ""

    def run(self, fns, est_us: float):
        """fns: list of closures (rotated input sets). Returns (median_us, iters)."""
        iters = int(self.target_ms * 1e3 / max(est_us, 1.0))
        iters = max(self.min_iters, min(self.max_iters, iters))
        for i in range(self.warmup):
            fns[i % len(fns)]()
        if not self.cuda:
            ts = []
            for i in range(iters):
                t0 = time.perf_counter()
                fns[i % len(fns)]()
                ts.append((time.perf_counter() - t0) * 1e6)
            return median(ts), iters
        torch.cuda.synchronize()
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
        # keep the GPU busy while the host queues the timed launches
        torch.cuda._sleep(int(min(2e8, 2e6 + 3e3 * iters * 20)))
        for i in range(iters):
            starts[i].record()
            fns[i % len(fns)]()
            ends[i].record()
        torch.cuda.synchronize()
        ts = [s.elapsed_time(e) * 1e3 for s, e in zip(starts, ends)]
        self.last_clock_mhz = self.clock_under_load(fns, median(ts))
        return median(ts), iters

    def clock_under_load(self, fns, us: float, ms: float = 60.0):
        """Median SM clock (NVML, via torch.cuda.clock_rate) while the kernel runs back to back
        for about `ms`: H100s throttle under the power cap at full load, so the clock a kernel
        runs at depends on the kernel and on how many SMs it has. '' when NVML is unavailable."""
        try:
            torch.cuda.clock_rate()
        except Exception:  # noqa: BLE001  (no pynvml / NVML)
            return ""
        n = max(4, int(ms * 1e3 / max(us, 1.0)))
        for i in range(n):
            fns[i % len(fns)]()
        done = torch.cuda.Event()
        done.record()
        samples = []
        while not done.query():
            samples.append(torch.cuda.clock_rate())
            time.sleep(0.002)
        torch.cuda.synchronize()
        return f"{median(samples):.0f}" if samples else ""


def nsets_for(bytes_per_set: int) -> int:
    return max(1, min(8, math.ceil(L2_ROTATE_BYTES / max(bytes_per_set, 1))))


def gemm_operands(M, N, K, layout, dev, dtype):
    """a [M,K] and b [K,N] views with the given storage layout."""
    if layout == "NT":      # B stored as [N,K] (weight), used transposed
        a = torch.randn(M, K, device=dev, dtype=dtype)
        b = torch.randn(N, K, device=dev, dtype=dtype).t()
    elif layout == "TN":    # A stored as [K,M], used transposed
        a = torch.randn(K, M, device=dev, dtype=dtype).t()
        b = torch.randn(K, N, device=dev, dtype=dtype)
    else:                   # NN
        a = torch.randn(M, K, device=dev, dtype=dtype)
        b = torch.randn(K, N, device=dev, dtype=dtype)
    return a, b


def make_gemm(M, N, K, layout, dev, dtype):
    """Return closures computing [M,K]x[K,N], one per rotated input set."""
    bytes_per_set = 2 * (M * K + K * N + M * N)
    fns = []
    for _ in range(nsets_for(bytes_per_set)):
        a, b = gemm_operands(M, N, K, layout, dev, dtype)
        c = torch.empty(M, N, device=dev, dtype=dtype)
        fns.append(lambda a=a, b=b, c=c: torch.matmul(a, b, out=c))
    return fns


def check_gemm(M, N, K, layout, dev, dtype):
    """One reduced instance (same layout) against float64 on the CPU: relative error.
    The output is poisoned with NaN first, so an unwritten element fails the check."""
    m, n, k = min(M, 1024), min(N, 1024), min(K, 1024)
    a, b = gemm_operands(m, n, k, layout, dev, dtype)
    c = torch.full((m, n), float("nan"), device=dev, dtype=dtype)
    torch.matmul(a, b, out=c)
    ref = a.double().cpu() @ b.double().cpu()
    return float((c.double().cpu() - ref).norm() / ref.norm())


def make_layernorm(M, N, dev, dtype):
    fns = []
    for _ in range(nsets_for(4 * M * N)):
        x = torch.randn(M, N, device=dev, dtype=dtype)
        w = torch.randn(N, device=dev, dtype=dtype)
        b = torch.randn(N, device=dev, dtype=dtype)
        fns.append(lambda x=x, w=w, b=b: F.layer_norm(x, (N,), w, b, 1e-5))
    return fns


def make_attention(B, H, S, D, dev, dtype):
    fns = []
    for _ in range(nsets_for(4 * 2 * B * H * S * D)):
        q, k, v = (torch.randn(B, H, S, D, device=dev, dtype=dtype) for _ in range(3))
        fns.append(lambda q=q, k=k, v=v: F.scaled_dot_product_attention(q, k, v, is_causal=True))
    return fns


# ---------------------------------------------------------------- SM-count verification
try:  # Triton is on the device image; a module-level plain function keeps `tl` a global
    import triton
    import triton.language as tl

    def _smid_kernel(out_ptr, spin):
        pid = tl.program_id(0)
        s = tl.inline_asm_elementwise("mov.u32 $0, %smid;", "=r", [], dtype=tl.int32,
                                      is_pure=False, pack=1)
        acc = pid
        for _ in range(spin):  # a little work so blocks spread over all SMs
            acc = (acc * 1103515245 + 12345) % 2147483647
        tl.store(out_ptr + pid, s + (acc * 0))
except Exception:  # noqa: BLE001
    triton = None


def count_sms_triton(nblocks=8192):
    """Distinct %smid values over many blocks. A fresh JIT function per call, so its module is
    loaded in the context current now (green or primary), not reused from another one."""
    if triton is None:
        raise RuntimeError("triton not importable")
    kern = triton.jit(_smid_kernel)
    out = torch.full((nblocks,), -1, dtype=torch.int32, device="cuda")
    kern[(nblocks,)](out, 2000)
    torch.cuda.synchronize()
    assert int((out < 0).sum()) == 0, "smid kernel left unwritten entries"
    return int(torch.unique(out).numel())


_cupy_calls = 0


def count_sms_cupy(nblocks=8192):
    import cupy as cp
    global _cupy_calls
    _cupy_calls += 1
    src = f"// call {_cupy_calls} (unique source: load the module in the current context)\n" + r'''
    extern "C" __global__ void smid(int* out, int spin) {
        unsigned s; asm volatile("mov.u32 %0, %%smid;" : "=r"(s));
        long long t0 = clock64(); while (clock64() - t0 < spin) {}
        if (threadIdx.x == 0) out[blockIdx.x] = (int)s;
    }'''
    k = cp.RawKernel(src, "smid")
    out = torch.full((nblocks,), -1, dtype=torch.int32, device="cuda")
    stream = cp.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream)
    with stream:
        k((nblocks,), (32,), (cp.intp(out.data_ptr()), cp.int32(20000)))
    torch.cuda.synchronize()
    assert int((out < 0).sum()) == 0, "smid kernel left unwritten entries"
    return int(torch.unique(out).numel())


def count_sms():
    msgs = []
    for name, f in (("triton", count_sms_triton), ("cupy", count_sms_cupy)):
        try:
            n = f()
            return n, f"smid_count={n} via {name}"
        except Exception as e:  # record and try the next way
            msgs.append(f"{name} failed: {type(e).__name__}: {str(e)[:200]}")
    return None, "smid_count=unverified (" + "; ".join(msgs) + ")"


# ---------------------------------------------------------------- green contexts
class DriverGreenContext:
    """A green context made with the CUDA driver API directly (ctypes on libcuda), so that the
    split can pass CU_DEV_SM_RESOURCE_SPLIT_IGNORE_SM_COSCHEDULING: without that flag (what
    torch.cuda.green_contexts uses) Hopper rounds a partition up to whole 8-SM co-scheduling
    groups, so 66 SMs becomes 72. Kernels run on a stream created in the green context, made
    torch's current stream; the green context's CUcontext is pushed current so that modules load
    into it. cuda.h maps cuCtxPush/PopCurrent to their _v2 symbols, so ctypes names those."""

    SPLIT_IGNORE_SM_COSCHEDULING = 1
    RESOURCE_TYPE_SM = 1
    GREEN_CTX_DEFAULT_STREAM = 1
    STREAM_NON_BLOCKING = 1
    RESOURCE_BYTES = 4096  # larger than CUdevResource in any CUDA 12.4-13.x header
    SM_COUNT_OFFSET = 96   # CUdevResource: int type; uchar pad[92]; union { CUdevSmResource sm; } -> smCount

    def __init__(self, num_sms: int, device: int, flags: int = SPLIT_IGNORE_SM_COSCHEDULING):
        import ctypes as C
        self.C = C
        self.cu = C.CDLL("libcuda.so.1")
        torch.cuda.init()
        torch.zeros(1, device="cuda")  # primary context exists and is current
        dev = C.c_int()
        self._check("cuDeviceGet", self.cu.cuDeviceGet(C.byref(dev), device))
        whole = C.create_string_buffer(self.RESOURCE_BYTES)
        self._check("cuDeviceGetDevResource",
                    self.cu.cuDeviceGetDevResource(dev, whole, self.RESOURCE_TYPE_SM))
        result = C.create_string_buffer(self.RESOURCE_BYTES)
        rest = C.create_string_buffer(self.RESOURCE_BYTES)
        groups = C.c_uint(1)
        self._check("cuDevSmResourceSplitByCount", self.cu.cuDevSmResourceSplitByCount(
            result, C.byref(groups), whole, rest, C.c_uint(flags), C.c_uint(num_sms)))
        if groups.value != 1:
            raise RuntimeError(f"split of {num_sms} SMs (flags={flags}) gave {groups.value} groups")
        self.sm_count = C.c_uint.from_buffer_copy(result.raw[self.SM_COUNT_OFFSET:self.SM_COUNT_OFFSET + 4]).value
        desc = C.c_void_p()
        self._check("cuDevResourceGenerateDesc", self.cu.cuDevResourceGenerateDesc(C.byref(desc), result, 1))
        self.gctx = C.c_void_p()
        self._check("cuGreenCtxCreate", self.cu.cuGreenCtxCreate(C.byref(self.gctx), desc, dev,
                                                                 self.GREEN_CTX_DEFAULT_STREAM))
        self.ctx = C.c_void_p()
        self._check("cuCtxFromGreenCtx", self.cu.cuCtxFromGreenCtx(C.byref(self.ctx), self.gctx))
        stream = C.c_void_p()
        self._check("cuGreenCtxStreamCreate", self.cu.cuGreenCtxStreamCreate(
            C.byref(stream), self.gctx, self.STREAM_NON_BLOCKING, 0))
        self.stream = torch.cuda.ExternalStream(stream.value)
        self._saved_stream = None

    def _check(self, what, rc):
        if rc != 0:
            name = self.C.c_char_p()
            self.cu.cuGetErrorName(rc, self.C.byref(name))
            raise RuntimeError(f"{what} failed: {rc} {name.value.decode() if name.value else ''}")

    def set_context(self):
        self._check("cuCtxPushCurrent", self.cu.cuCtxPushCurrent_v2(self.ctx))
        self._saved_stream = torch.cuda.current_stream()
        torch.cuda.set_stream(self.stream)

    def pop_context(self):
        torch.cuda.synchronize()
        torch.cuda.set_stream(self._saved_stream)
        popped = self.C.c_void_p()
        self._check("cuCtxPopCurrent", self.cu.cuCtxPopCurrent_v2(self.C.byref(popped)))


class SMPartition:
    """Context manager: whole GPU (num_sms == full) or a green context of num_sms SMs, made by
    torch.cuda.green_contexts (api="torch") or the driver API without SM co-scheduling
    (api="driver", see DriverGreenContext)."""

    def __init__(self, num_sms: int, full_sms: int, cuda: bool, api: str = "torch"):
        self.num_sms, self.full, self.cuda, self.api = num_sms, full_sms, cuda, api
        self.g = None
        self.note = ""

    def __enter__(self):
        if not self.cuda or self.num_sms == self.full:
            self.note = "primary_ctx"
            return self
        if self.api == "driver":
            g = DriverGreenContext(self.num_sms, torch.cuda.current_device())
            self.note = (f"driver_green_ctx(num_sms={self.num_sms}, ignore_sm_coscheduling, "
                         f"split_sm_count={g.sm_count})")
        else:
            from torch.cuda.green_contexts import GreenContext
            try:
                g = GreenContext.create(num_sms=self.num_sms, device_id=torch.cuda.current_device())
            except TypeError:  # older (2.11) signature: create(num_sms, device_id)
                g = GreenContext.create(self.num_sms, torch.cuda.current_device())
            self.note = f"green_ctx(num_sms={self.num_sms})"
        g.set_context()
        self.g = g
        return self

    def __exit__(self, *exc):
        if self.g is not None:
            torch.cuda.synchronize()
            self.g.pop_context()
            self.g = None
        return False


def log_clocks(tag):
    import subprocess
    try:
        r = subprocess.run(["nvidia-smi", "--query-gpu=clocks.sm,clocks.mem,clocks.max.sm,power.draw,"
                            "temperature.gpu,clocks_throttle_reasons.active", "--format=csv"],
                           capture_output=True, text=True, timeout=20)
        log(f"[clocks {tag}] " + r.stdout.strip().replace("\n", " | "))
    except Exception as e:  # noqa: BLE001
        log(f"[clocks {tag}] nvidia-smi failed: {e}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--sms", default="132,66", help="comma list; the device's full count = primary context")
    ap.add_argument("--partition", choices=("torch", "driver"), default="torch",
                    help="how SM partitions are made: torch.cuda.green_contexts, or the driver API "
                         "with IGNORE_SM_COSCHEDULING (needed for counts that are not multiples of 8)")
    ap.add_argument("--only", default="", help="comma list of kinds to measure (gemm,layernorm,attention); default all")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--min-iters", type=int, default=20)
    ap.add_argument("--max-iters", type=int, default=200)
    ap.add_argument("--target-ms", type=float, default=40.0)
    ap.add_argument("--no-attention", action="store_true")
    ap.add_argument("--cpu-smoke", action="store_true", help="tiny shapes on the CPU: logic check only")
    args = ap.parse_args()

    cuda = torch.cuda.is_available() and not args.cpu_smoke
    if not cuda and not args.cpu_smoke:
        sys.exit("no CUDA device; use --cpu-smoke for a logic check")
    dev = "cuda" if cuda else "cpu"
    dtype = torch.bfloat16
    if cuda:
        props = torch.cuda.get_device_properties(0)
        gpu = props.name
        full_sms = props.multi_processor_count
        log(f"gpu={gpu} sms={full_sms} mem={props.total_memory/2**30:.1f}GiB "
            f"L2={getattr(props, 'L2_cache_size', 0)/2**20:.0f}MiB cc={props.major}.{props.minor}")
        log(f"torch={torch.__version__} cuda={torch.version.cuda} cublas={torch.backends.cuda.preferred_blas_library()}")
        torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = True  # default; recorded
    else:
        gpu, full_sms = "cpu-smoke", 132
    sms_list = [int(s) for s in args.sms.split(",")]
    sms_list = [full_sms if s == 132 and cuda else s for s in sms_list]

    scale = 1 if cuda else 64  # shrink shapes for the CPU logic check
    S = lambda x: max(8, x // scale)  # noqa: E731

    gemms = [(n, S(M), S(N), S(K), lay) for n, M, N, K, lay in model_gemm_shapes()]
    gemms += [(f"extra.{n}", S(M), S(N), S(K), "NN") for n, M, N, K in EXTRA_GEMM_SHAPES]
    lns = [(f"{name}.layernorm", S(seq * batch), S(h)) for name, h, ffn, heads, seq, batch in MODELS]
    attns = []
    for name, h, ffn, heads, seq, batch in MODELS:
        hd = h / heads
        d = int(round(hd / 8.0)) * 8
        note = "" if d == hd else f"head_dim {h}/{heads}={hd:.2f} rounded to {d}"
        attns.append((f"{name}.attention", batch, heads // 8, S(seq), d if cuda else 16, note))

    if args.only:
        kinds = set(args.only.split(","))
        unknown = kinds - {"gemm", "layernorm", "attention"}
        if unknown:
            sys.exit(f"--only: unknown kind(s) {sorted(unknown)}; allowed: gemm, layernorm, attention")
        gemms = gemms if "gemm" in kinds else []
        lns = lns if "layernorm" in kinds else []
        attns = attns if "attention" in kinds else []

    bench = Bench(cuda, args.warmup, args.min_iters if cuda else 3, args.max_iters if cuda else 3,
                  args.target_ms)
    out = CsvOut(args.out, COLUMNS)
    tv = torch.__version__
    base = dict(gpu=gpu, torch_version=tv)

    for name, M, N, K, lay in gemms[:3]:
        err = check_gemm(M, N, K, lay, dev, dtype)
        log(f"check {name} ({lay}): rel err vs fp64 = {err:.2e}")
        if not (err < 2e-2):
            sys.exit(f"GEMM check failed: {err}")

    t_start = time.time()
    for num_sms in sms_list:
        part = SMPartition(num_sms, full_sms, cuda, args.partition)
        try:
            part.__enter__()
        except Exception as e:
            msg = f"GREEN CONTEXT FAILED for num_sms={num_sms}: {type(e).__name__}: {e}"
            log(msg)
            traceback.print_exc()
            for name, M, N, K, lay in gemms:
                out.row(name=name, kind="gemm", M=M, N=N, K=K, num_sms=num_sms, measured_us="", sm_clock_mhz="",
                        tflops="", iters=0, notes=f"FAILED green context: {type(e).__name__}", **base)
            continue
        try:
            smnote, used = "", None
            if cuda:
                used, smnote = count_sms()
                log(f"[num_sms={num_sms} {part.note}] {smnote}")
                if used is not None and used != num_sms:
                    log(f"NOTE: requested {num_sms} SMs, kernels ran on {used} SMs; the num_sms column "
                        f"records {used}")
            requested = num_sms
            notes0 = f"{part.note}; requested_sms={requested}; {smnote}".strip("; ")
            num_sms = used if used is not None else requested
            for name, M, N, K, lay in gemms:
                flops = 2.0 * M * N * K
                est_us = flops / (600e12 * num_sms / 132) * 1e6
                try:
                    fns = make_gemm(M, N, K, lay, dev, dtype)
                    us, it = bench.run(fns, est_us)
                    del fns
                    tf = flops / (us * 1e-6) / 1e12
                    out.row(name=name, kind="gemm", M=M, N=N, K=K, num_sms=num_sms,
                            measured_us=f"{us:.3f}", tflops=f"{tf:.2f}", iters=it,
                            notes=f"{notes0}; layout={lay}", sm_clock_mhz=bench.last_clock_mhz, **base)
                    log(f"gemm {name:32s} M={M:6d} N={N:6d} K={K:6d} sms={num_sms:3d} {us:10.2f} us {tf:7.1f} TFLOP/s")
                except Exception as e:
                    log(f"gemm {name} FAILED: {type(e).__name__}: {e}")
                    out.row(name=name, kind="gemm", M=M, N=N, K=K, num_sms=num_sms, measured_us="", sm_clock_mhz="",
                            tflops="", iters=0, notes=f"FAILED {type(e).__name__}", **base)
            if cuda:
                log_clocks(f"after GEMM sweep at num_sms={num_sms}")
            for name, M, N in lns:
                nbytes = 2 * M * N * 2
                try:
                    us, it = bench.run(make_layernorm(M, N, dev, dtype), nbytes / 2.5e12 * 1e6)
                    out.row(name=name, kind="layernorm", M=M, N=N, K=0, num_sms=num_sms,
                            measured_us=f"{us:.3f}", tflops="", iters=it, sm_clock_mhz=bench.last_clock_mhz,
                            notes=f"{notes0}; GBps={nbytes / (us * 1e-6) / 1e9:.1f}", **base)
                    log(f"layernorm {name:28s} M={M:6d} N={N:6d} sms={num_sms:3d} {us:10.2f} us {nbytes/(us*1e-6)/1e9:7.1f} GB/s")
                except Exception as e:
                    log(f"layernorm {name} FAILED: {type(e).__name__}: {e}")
                    out.row(name=name, kind="layernorm", M=M, N=N, K=0, num_sms=num_sms, measured_us="", sm_clock_mhz="",
                            tflops="", iters=0, notes=f"FAILED {type(e).__name__}", **base)
            if not args.no_attention:
                for name, B, H, Sq, D, anote in attns:
                    flops = 4.0 * B * H * Sq * Sq * D / 2
                    try:
                        us, it = bench.run(make_attention(B, H, Sq, D, dev, dtype),
                                           flops / (300e12 * num_sms / 132) * 1e6)
                        tf = flops / (us * 1e-6) / 1e12
                        out.row(name=name, kind="attention", M=B * H, N=Sq, K=D, num_sms=num_sms,
                                measured_us=f"{us:.3f}", tflops=f"{tf:.2f}", iters=it,
                                sm_clock_mhz=bench.last_clock_mhz,
                                notes=f"{notes0}; causal; batch={B} heads={H} {anote}".strip(), **base)
                        log(f"attention {name:28s} B={B} H={H} S={Sq} D={D} sms={num_sms:3d} {us:10.2f} us {tf:7.1f} TFLOP/s")
                    except Exception as e:
                        log(f"attention {name} FAILED: {type(e).__name__}: {e}")
                        out.row(name=name, kind="attention", M=B * H, N=Sq, K=D, num_sms=num_sms,
                                measured_us="", sm_clock_mhz="", tflops="", iters=0, notes=f"FAILED {type(e).__name__}", **base)
        finally:
            part.__exit__(None, None, None)
        if cuda:
            torch.cuda.empty_cache()
    out.close()
    log(f"done in {time.time() - t_start:.1f} s -> {args.out}")
    summarize(args.out)


def summarize(path):
    import csv
    rows = [r for r in csv.DictReader(open(path)) if r["measured_us"]]
    log("\nsummary: kind num_sms n  min/median/max TFLOP/s (gemm, attention) or GB/s (layernorm)")
    for kind in ("gemm", "attention", "layernorm"):
        for sms in sorted({r["num_sms"] for r in rows}, key=int, reverse=True):
            sel = [r for r in rows if r["kind"] == kind and r["num_sms"] == sms]
            if not sel:
                continue
            if kind == "layernorm":
                v = [float(r["notes"].split("GBps=")[1].split(";")[0]) for r in sel]
            else:
                v = [float(r["tflops"]) for r in sel]
            log(f"  {kind:9s} {sms:>4s} {len(sel):3d}  {min(v):8.1f} {median(v):8.1f} {max(v):8.1f}")
    sms_all = sorted({int(r["num_sms"]) for r in rows}, reverse=True)
    gem = lambda s: {r["name"]: float(r["measured_us"]) for r in rows  # noqa: E731
                     if r["kind"] == "gemm" and int(r["num_sms"]) == s and not r["name"].startswith("extra.")}
    if sms_all:
        full = gem(sms_all[0])
        for s in sms_all[1:]:
            part = gem(s)
            ratios = [part[n] / full[n] for n in full if n in part]
            if ratios:
                log(f"  time({s} SMs)/time({sms_all[0]} SMs) over paper GEMMs: min {min(ratios):.2f} "
                    f"median {median(ratios):.2f} max {max(ratios):.2f}")


if __name__ == "__main__":
    main()
