"""A memory-streaming kernel of a few CTAs, as NCCL's copy and reduce primitives run on one GPU.

`ctas` blocks of `threads` threads; block c walks its contiguous share of `nbytes` (the output
bytes) in chunks of threads x 16 B x unroll. `copy` reads one buffer and writes another; `reduce`
reads two, adds (one flop per bf16 element) and writes one. This is
scripts/measure/measure_concurrent.py's kernel, modelled as the CUDA compiler built it (nvrtc,
CUDA 13, sm_90; the SASS is read with `cuobjdump -sass`), not as its source reads:

- `reduce`: all 2 x unroll 16 B loads of a chunk are issued, then the adds and the unroll
  stores: a chunk's loads are in flight together;
- `copy`: the compiler interleaved each 16 B load with its store (LDG, STG, LDG, STG, ...), and a
  store waits for its load's data, so a thread has one load in flight: the chunk is unroll
  steps of threads x 16 B, each a load, its wait and a posted store.

The registers per thread are what the compiler gave that kernel (copy 32, reduce 56), not fitted.
"""
from __future__ import annotations

from harness.errors import ConfigError
from harness.gpu.isa_text import isa
from harness.gpu.kernels import Program, add_buffer, affine

KINDS = ("copy", "reduce")
VEC_BYTES = 16
REGS_PER_THREAD = {"copy": 32, "reduce": 56}


def chunk_bytes(threads: int = 512, unroll: int = 4) -> int:
    """Bytes one CTA has in flight per step: every thread's `unroll` 16 B loads."""
    return threads * VEC_BYTES * unroll


def add_stream_kernel(wl, kind: str, ctas: int, nbytes: int, *, stream: int, start_ns: float = 0.0,
                      threads: int = 512, unroll: int = 4, priority: int = 0) -> int:
    """Append the streaming kernel and its launch to workload `wl`; returns the launch index.

    Every CTA moves nbytes // ctas rounded down to whole chunks (as the measured kernel is
    sized), at least one chunk."""
    if kind not in KINDS:
        raise ConfigError("stream_kind", f"'{kind}' is not a streaming kernel (allowed: {', '.join(KINDS)})")
    if ctas < 1 or nbytes < 1:
        raise ConfigError("stream kernel", f"needs ctas >= 1 and bytes >= 1 (got ctas={ctas}, bytes={nbytes})")
    chunk = chunk_bytes(threads, unroll)
    steps = max(1, nbytes // ctas // chunk)
    per_cta = steps * chunk
    total = per_cta * ctas
    srcs = [add_buffer(wl, f"stream_src{i}", total) for i in range(2 if kind == "reduce" else 1)]
    dst = add_buffer(wl, "stream_dst", total)
    k = wl.kernels.add(name=f"stream_{kind}", grid_x=ctas, grid_y=1, threads_per_block=threads,
                       regs_per_thread=REGS_PER_THREAD[kind], smem_bytes=0, loads_via_l1=True)
    p = Program(k)
    addr = lambda: affine(0, bx=per_cta, loops=(chunk,))  # noqa: E731
    p.loop(steps)
    if kind == "reduce":
        for s in srcs:
            p.ins(isa.LD, is_async=True, buffer=s, addr=addr(), rows=1, row_bytes=chunk)
        p.ins(isa.WAIT, count=0)
        p.ins(isa.ALU, elements=chunk // 2, flops_per_element=1.0)
        p.ins(isa.ST, is_async=True, buffer=dst, addr=addr(), rows=1, row_bytes=chunk)
    else:  # one 16 B load per thread in flight: unroll load -> store steps per chunk
        row = threads * VEC_BYTES
        for u in range(unroll):
            step_addr = lambda: affine(u * row, bx=per_cta, loops=(chunk,))  # noqa: E731
            p.ins(isa.LD, is_async=True, buffer=srcs[0], addr=step_addr(), rows=1, row_bytes=row)
            p.ins(isa.WAIT, count=0)
            p.ins(isa.ST, is_async=True, buffer=dst, addr=step_addr(), rows=1, row_bytes=row)
    p.end()
    wl.launches.add(kernel=len(wl.kernels) - 1, stream=stream, priority=priority, start_ns=float(start_ns))
    return len(wl.launches) - 1


def moved_bytes(kind: str, ctas: int, nbytes: int, threads: int = 512, unroll: int = 4) -> dict[str, int]:
    """Bytes the kernel reads and writes (what its tile program must move)."""
    chunk = chunk_bytes(threads, unroll)
    total = max(1, nbytes // ctas // chunk) * chunk * ctas
    return {"read": total * (2 if kind == "reduce" else 1), "write": total}

