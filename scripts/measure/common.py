"""Shared helpers for the scripts/measure/ device measurements.

Safety: NVLink multicast (NVLS / multimem / symmetric-memory multicast) must stay OFF on the
lent multi-GPU machines: a program that uses it can put the host's shared GPUs out of service.
`enforce_no_multicast()` sets the three switches in os.environ and refuses to run when any of
them is already set to another value. Call it before importing torch.distributed.

Model shapes follow the CAIS paper's Table I (reference/paper/models.csv) with tensor
parallelism TP=8 (Megatron column/row parallel linear layers).
"""
from __future__ import annotations

import csv
import os
import sys

SAFE_ENV = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
}


def enforce_no_multicast() -> None:
    """Set the multicast-off variables; exit if one is set to something else."""
    bad = {k: os.environ[k] for k, v in SAFE_ENV.items() if k in os.environ and os.environ[k] != v}
    if bad:
        sys.stderr.write(f"REFUSING TO RUN: NVLink multicast switches set wrongly: {bad}; "
                         f"required {SAFE_ENV}\n")
        sys.exit(3)
    changed = any(os.environ.get(k) != v for k, v in SAFE_ENV.items())
    os.environ.update(SAFE_ENV)
    if changed and "torch.distributed" in sys.modules:
        # too late to guarantee NCCL/PyTorch read our values before init; be loud
        sys.stderr.write("warning: torch.distributed imported before enforce_no_multicast()\n")


# name, hidden, ffn_hidden, heads, seq_len, batch  (CAIS Table I; llama_7b_full from Table II)
MODELS = [
    ("mega_gpt_4b", 2048, 8192, 24, 1024, 16),
    ("mega_gpt_8b", 3072, 12288, 32, 1024, 12),
    ("llama_7b", 4096, 11264, 32, 3072, 3),
    ("llama_7b_full", 8192, 22528, 64, 3072, 3),
]
TP = 8


def layer_gemms(h: int, ffn: int, tp: int = TP):
    """Forward GEMMs of one transformer layer under TP, as (layer, K_fwd, N_fwd, parallel)."""
    return [
        ("qkv", h, 3 * h // tp, "column"),
        ("attn_out", h // tp, h, "row"),
        ("fc1", h, ffn // tp, "column"),
        ("fc2", ffn // tp, h, "row"),
    ]


def model_gemm_shapes(tp: int = TP):
    """All paper GEMMs: (name, M, N, K, layout). A row (M,N,K) means [M,K] x [K,N].

    fwd:   Y  = X . W        (M=T,     N=N_fwd, K=K_fwd)   Megatron stores W as [N,K]: X @ W^T
    dgrad: dX = dY . W^T     (M=T,     N=K_fwd, K=N_fwd)   dY @ W  (both row-major)
    wgrad: dW = X^T . dY     (M=K_fwd, N=N_fwd, K=T)       X stored [T,K_fwd]: X^T @ dY
    """
    out = []
    for name, h, ffn, _heads, seq, batch in MODELS:
        T = seq * batch
        for layer, kf, nf, _par in layer_gemms(h, ffn, tp):
            out.append((f"{name}.{layer}.fwd", T, nf, kf, "NT"))
            out.append((f"{name}.{layer}.dgrad", T, kf, nf, "NN"))
            out.append((f"{name}.{layer}.wgrad", kf, nf, T, "TN"))
    return out


def row_parallel_shapes(tp: int = TP):
    """Row-parallel forward GEMMs (followed by an all-reduce of the [M,N] output)."""
    out = []
    for name, h, ffn, _heads, seq, batch in MODELS:
        T = seq * batch
        for layer, kf, nf, par in layer_gemms(h, ffn, tp):
            if par == "row":
                out.append((f"{name}.{layer}.fwd", T, nf, kf))
    return out


EXTRA_GEMM_SHAPES = [
    # (name, M, N, K) square and odd / skinny shapes so a fit is not only the paper's shapes
    ("sq1024", 1024, 1024, 1024),
    ("sq2048", 2048, 2048, 2048),
    ("sq4096", 4096, 4096, 4096),
    ("sq6144", 6144, 6144, 6144),
    ("sq8192", 8192, 8192, 8192),
    ("skinny_n128", 16384, 128, 4096),
    ("skinny_m256", 256, 8192, 8192),
    ("skinny_k256", 8192, 8192, 256),
    ("odd_3000", 3000, 3000, 3000),
    ("odd_5120x1000", 5120, 1000, 7168),
    ("tall_65536", 65536, 1024, 1024),
    ("deep_k65536", 1024, 1024, 65536),
]


def cuda_functions(cp, code: str, names, smem: int = 0):
    """Compiles `code` (C++17) and returns ({name: kernel}, GPU name, SM count); each kernel may
    take `smem` bytes of dynamic shared memory."""
    mod = cp.RawModule(code=code, options=("-std=c++17",))
    fns = {k: mod.get_function(k) for k in names}
    for f in fns.values():
        f.max_dynamic_shared_size_bytes = smem
    props = cp.cuda.runtime.getDeviceProperties(0)
    return fns, props["name"].decode(), props["multiProcessorCount"]


class CsvOut:
    """CSV writer that flushes every row so partial results survive a cut-off run."""

    def __init__(self, path: str, columns):
        self.columns = list(columns)
        d = os.path.dirname(path)
        if d:
            os.makedirs(d, exist_ok=True)
        self.f = open(path, "w", newline="")
        self.w = csv.DictWriter(self.f, fieldnames=self.columns)
        self.w.writeheader()
        self.f.flush()

    def row(self, **kw):
        missing = set(self.columns) - set(kw)
        extra = set(kw) - set(self.columns)
        if missing or extra:
            raise ValueError(f"csv row mismatch: missing={missing} extra={extra}")
        self.w.writerow(kw)
        self.f.flush()
        os.fsync(self.f.fileno())

    def close(self):
        self.f.close()


def median(xs):
    s = sorted(xs)
    n = len(s)
    if n == 0:
        return float("nan")
    return s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])


def stamped_spans(launch, stamps, reps: int, sync):
    """Run `launch(r)` reps + 1 times (the first a warm-up), each after `sync()` and a 0.2 ms
    pause; `stamps` (a device array of {smid, start ns, end ns} per CTA) is read after each.
    Returns the spans in us (last end - first start) of the timed runs and the last run's
    stamps as an int64 array of shape (CTAs, 3)."""
    import time

    spans, s = [], None
    for r in range(reps + 1):
        sync()
        time.sleep(2e-4)
        launch(r)
        sync()
        s = stamps.get().reshape(-1, 3).astype("int64")
        if r:
            spans.append((s[:, 2].max() - s[:, 1].min()) / 1e3)
    return spans, s


def per_sm(stamps) -> tuple[int, int]:
    """(distinct SMs, the most CTAs any one SM ran) of a stamps array from stamped_spans."""
    sms = stamps[:, 0].tolist()
    return len(set(sms)), max(sms.count(x) for x in set(sms))


def compile_sass(kernels: str, unroll: int) -> str:
    """The SASS (nvcc -arch=sm_90, cuobjdump) of CUDA source `kernels` with UNROLL defined."""
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        cu, cubin = os.path.join(d, "k.cu"), os.path.join(d, "k.cubin")
        with open(cu, "w") as f:
            f.write(f"#define UNROLL {unroll}\n" + kernels)
        subprocess.run(["nvcc", "-std=c++17", "-arch=sm_90", "-cubin", "-o", cubin, cu], check=True)
        return subprocess.run(["cuobjdump", "-sass", cubin], check=True, capture_output=True, text=True).stdout


def loads_in_flight(sass: str, function: str) -> tuple[list[str], list[str], int]:
    """Of `function` in `sass`: the destination registers of its 16 B loads, those before its first
    16 B store (loads in flight when a round's loads all precede its stores), and its local stores
    (register spills)."""
    import re

    body = re.search(rf"Function : {function}\b(.*?)(?=Function :|\Z)", sass, re.S).group(1)
    first_store = body.find("STG.E.128")
    dests = re.findall(r"LDG\.E\.128\S*\s+(R\d+),", body)
    before = re.findall(r"LDG\.E\.128\S*\s+(R\d+),", body[:first_store] if first_store >= 0 else body)
    return dests, before, len(re.findall(r"\bSTL\b", body))
