"""Kernel builders: tile-ISA programs (proto/isa.proto) for GEMM, layernorm, attention and the
multi-GPU AG-GEMM used by the CAIS tests.

GEMM follows CUTLASS/cuBLAS on Hopper: a block computes one TM x TN output tile with a K loop of
64-wide steps; a multistage pipeline (``stages``) keeps stages-1 steps of async tile loads ahead
of the tensor cores; 2-CTA clusters multicast the shared operand (each CTA loads half of it);
the grid runs in waves over the SMs (one 192 KB-smem block per SM). The tile shape and split-K
factor are chosen per shape by :func:`choose_gemm` from an analytical estimate, as cuBLAS's
heuristics do; split-K runs the K slices as concurrent launches followed by a reduction kernel.
"""
from __future__ import annotations

import csv
import math
import re
from dataclasses import dataclass, fields
from functools import lru_cache
from pathlib import Path

from harness.gpu.isa_text import isa
from harness.params.gpu import GpuParams

TK = 64
ELEM = 2  # bf16


def affine(base: int = 0, bx: int = 0, by: int = 0, g: int = 0, loops: tuple[int, ...] = (), mod: int = 0):
    a = isa.Affine(base=base, block_x=bx, block_y=by, gpu=g, modulo=mod)
    loops = list(loops)
    while loops and loops[-1] == 0:
        loops.pop()
    a.loop.extend(loops)
    return a


class Program:
    """Appends instructions to a kernel's program."""

    def __init__(self, kernel):
        self.k = kernel

    def ins(self, op, **kw):
        i = self.k.program.add(op=op)
        for key, v in kw.items():
            if isinstance(v, isa.Affine):
                getattr(i, key).CopyFrom(v)
            else:
                setattr(i, key, v)
        return i

    def loop(self, count: int):
        return self.ins(isa.LOOP, count=count)

    def end(self):
        return self.ins(isa.ENDLOOP)


def new_workload(name: str, gpus: int = 1, functional: bool = False):
    return isa.Workload(name=name, num_gpus=gpus, functional=functional)


def add_buffer(wl, name: str, nbytes: int, dtype=isa.BF16, multicast: bool = False) -> int:
    wl.buffers.add(name=name, bytes=int(nbytes), dtype=dtype, multicast=multicast)
    return len(wl.buffers) - 1


# ---------------------------------------------------------------- GEMM
@dataclass(frozen=True)
class GemmConfig:
    """Tile shape, split-K factor and schedule of one GEMM.

    schedule 'dp': data-parallel waves of tiles, each K range split `split` ways (split > 1:
    concurrent slice kernels + a reduction whose blocks depend on the slices' blocks).
    schedule 'dp_sk': cuBLAS/CUTLASS stream-K hybrid: full rows of tiles run data-parallel, the
    tail tiles of the last partial wave are split `split` ways so they fill the idle SMs, and
    a dependent fix-up kernel sums their partials.
    schedule 'persistent': `grid` CTAs (cuBLAS sizes it for the whole device), CTA c computes
    tiles c, c + grid, c + 2 grid, ... in order; inside a smaller SM partition the CTAs run in
    rounds, as the hardware dispatches them."""

    tm: int
    tn: int
    split: int = 1
    schedule: str = "dp"
    stages: int = 4
    cluster: int = 2
    grid: int = 0

    @property
    def smem(self) -> int:
        return self.stages * (self.tm + self.tn) * TK * ELEM

    @property
    def threads(self) -> int:
        return 384 if self.tm * self.tn >= 128 * 256 else 256

    def describe(self) -> str:
        grid = f" grid{self.grid}" if self.schedule == "persistent" else ""
        return f"{self.tm}x{self.tn} {self.schedule} split{self.split}{grid}"


CANDIDATE_TILES = [(128, 256), (256, 128), (128, 128)]
CANDIDATE_SPLITS = [1, 2, 3, 4, 6, 8]


def _params(p: GpuParams | dict | None) -> GpuParams:
    if p is None:
        return GpuParams()
    if isinstance(p, GpuParams):
        return p
    base = GpuParams()
    kw = {f.name: p.get(f"gpu.{f.name}", p.get(f.name, getattr(base, f.name))) for f in fields(GpuParams)}
    return GpuParams(**kw)


def _tail(M: int, N: int, num_sms: int, c: GemmConfig) -> tuple[int, int, int]:
    """(data-parallel rows of tiles, tail tiles, tail split) of a dp_sk schedule, sized for the
    config's grid when it has one (a recorded cuBLAS launch), else for num_sms."""
    num_sms = c.grid or num_sms
    gx, gy = math.ceil(N / c.tn), math.ceil(M / c.tm)
    tiles = gx * gy
    rows_dp = (tiles // num_sms) * num_sms // gx
    tail = tiles - rows_dp * gx
    split = max(1, min(8, num_sms // max(tail, 1)))
    return rows_dp, tail, split


def estimate_gemm_us(M: int, N: int, K: int, num_sms: int, c: GemmConfig, p: GpuParams | dict | None = None) -> float:
    """Analytical time of one configuration (the heuristic's cost model, not the simulation)."""
    p = _params(p)
    clk = p.clock_mhz * 1e6
    gx, gy = math.ceil(N / c.tn), math.ceil(M / c.tm)
    kts = math.ceil(K / TK)
    mma_s = 2 * c.tm * c.tn * TK / (p.tc_flops_per_cycle_per_sm * p.tc_efficiency * clk)
    step_bytes = (min(c.tm, c.tn) + max(c.tm, c.tn) / c.cluster) * TK * ELEM
    hbm = p.hbm_bw_gbps * p.hbm_efficiency * 1e9
    fixed = p.tb_overhead_ns * 1e-9 + (p.l2_latency_ns + p.hbm_latency_ns) * 1e-9

    def step(active: int) -> float:
        return max(mma_s, active * step_bytes / (p.l2_bw_gbps * 1e9), step_bytes / (p.sm_l2_bytes_per_cycle * clk))

    def waves(blocks: int, kt: int) -> float:
        full, rem = divmod(blocks, num_sms)
        t = full * (kt * step(num_sms) + fixed)
        if rem:
            t += kt * step(rem) + fixed
        return t

    reduce_s = 0.0
    if c.schedule == "dp_sk":
        rows_dp, tail, s = _tail(M, N, num_sms, c)
        t = waves(rows_dp * gx, kts) + waves(tail * s, math.ceil(kts / s))
        reduce_s = (tail * c.tm * c.tn * (4 * s + ELEM)) / hbm + p.tb_overhead_ns * 1e-9
    else:
        t = waves(gx * gy * c.split, math.ceil(kts / c.split))
        if c.split > 1:
            reduce_s = (M * N * 4 * c.split + M * N * ELEM) / hbm + p.tb_overhead_ns * 1e-9
    t = max(t, (M * K + N * K + M * N) * ELEM / hbm) + reduce_s
    return t * 1e6 + p.kernel_launch_ns * 1e-3


def candidates(M: int, N: int, K: int, num_sms: int) -> list[GemmConfig]:
    out = []
    for tm, tn in CANDIDATE_TILES:
        tiles = math.ceil(M / tm) * math.ceil(N / tn)
        for s in CANDIDATE_SPLITS:
            if s > 1 and (K // s < 512 or tiles >= num_sms):
                continue
            out.append(GemmConfig(tm, tn, s))
        if tiles > num_sms and tiles % num_sms:
            c = GemmConfig(tm, tn, 1, "dp_sk")
            if _tail(M, N, num_sms, c)[2] > 1 and K >= 1024:
                out.append(c)
    return out


def choose_gemm(M: int, N: int, K: int, num_sms: int, p: GpuParams | dict | None = None) -> GemmConfig:
    best = None
    for c in candidates(M, N, K, num_sms):
        t = estimate_gemm_us(M, N, K, num_sms, c, p)
        if best is None or t < best[0] - 1e-9:
            best = (t, c)
    return best[1]


def _tile_rows(M: int, N: int, c: GemmConfig) -> tuple[int, int, int, int]:
    """(A rows, B rows) one CTA loads per K step, and the tile's mean extent (rows, columns).

    Edge tiles hang over the matrix: TMA fills the overhang with zeros without memory traffic
    while the tensor cores still compute the whole tile, so loads and stores move the tile's
    mean in-bounds extent (M / tile rows, N / tile columns) and the mma stays tm x tn.
    TMA multicast in a 2-CTA cluster: the CTAs share the larger operand, each loads half (the
    recorded kernels' other cluster shapes, 2x2 and 2x4, were tried as per-axis sharing: it
    fitted worse)."""
    tm_eff = min(c.tm, math.ceil(M / math.ceil(M / c.tm)))
    tn_eff = min(c.tn, math.ceil(N / math.ceil(N / c.tn)))
    a_rows = max(1, tm_eff // c.cluster) if c.tm > c.tn else tm_eff
    b_rows = max(1, tn_eff // c.cluster) if c.tm <= c.tn else tn_eff
    return a_rows, b_rows, tm_eff, tn_eff


def _k_pipeline(p: Program, c: GemmConfig, kt: int, pre: int, loads) -> None:
    """The K loop of one tile: `pre` steps of async loads ahead (prologue), then load step
    i + pre while the tensor cores work on step i, then drain the last `pre` steps.
    `loads(shift)` emits the loads of step L + shift of the innermost loop L."""
    p.loop(pre)
    loads(0)
    p.end()
    if kt > pre:
        p.loop(kt - pre)
        loads(pre)
        p.ins(isa.WAIT, count=2 * pre)
        p.ins(isa.MMA, m=c.tm, n=c.tn, k=TK, dtype=isa.BF16)
        p.end()
    p.loop(pre)
    p.ins(isa.WAIT, count=0)
    p.ins(isa.MMA, m=c.tm, n=c.tn, k=TK, dtype=isa.BF16)
    p.end()


def _gemm_kernel(wl, name: str, M: int, N: int, K: int, k0: int, kl: int, c: GemmConfig, a: int, b: int,
                 out: int, out_elem: int, out_base: int = 0, grid: tuple[int, int] | None = None,
                 tile0: int = 0):
    """One GEMM kernel over K range [k0, k0+kl): A [M,K] row-major, B stored [N,K] (NT).

    grid None: the full (N/tn, M/tm) grid. Otherwise a (tiles, 1) grid of linear tiles starting
    at tile0 (tail kernels): bx walks the tile columns modulo N/tn, rows start at tile0's row."""
    gx, gy = math.ceil(N / c.tn), math.ceil(M / c.tm)
    tail = grid is not None
    grid_x, grid_y = grid if tail else (gx, gy)
    k = wl.kernels.add(name=name, grid_x=grid_x, grid_y=grid_y, threads_per_block=c.threads, regs_per_thread=168,
                       smem_bytes=c.smem)
    p = Program(k)
    kt = max(1, math.ceil(kl / TK))
    pre = min(c.stages - 1, kt)
    lda = K * ELEM
    a0 = k0 * ELEM
    a_rows, b_rows, tm_eff, tn_eff = _tile_rows(M, N, c)
    col0, row0 = tile0 % gx, tile0 // gx

    def loads(shift: int):
        off = a0 + shift * TK * ELEM
        if tail:
            a_addr = affine(off + row0 * c.tm * lda, loops=(TK * ELEM,))
            b_addr = affine(off + col0 * c.tn * lda, bx=c.tn * lda, loops=(TK * ELEM,), mod=gx * c.tn * lda)
        else:
            a_addr = affine(off, by=c.tm * lda, loops=(TK * ELEM,))
            b_addr = affine(off, bx=c.tn * lda, loops=(TK * ELEM,))
        p.ins(isa.LD, is_async=True, buffer=a, addr=a_addr, rows=a_rows, row_bytes=TK * ELEM, row_stride=lda)
        p.ins(isa.LD, is_async=True, buffer=b, addr=b_addr, rows=b_rows, row_bytes=TK * ELEM, row_stride=lda)

    _k_pipeline(p, c, kt, pre, loads)
    ld = N * out_elem
    if tail:
        addr = affine(out_base + row0 * c.tm * ld + col0 * c.tn * out_elem, bx=c.tn * out_elem)
    else:
        addr = affine(out_base, bx=c.tn * out_elem, by=c.tm * ld)
    p.ins(isa.ST, buffer=out, addr=addr, rows=tm_eff, row_bytes=tn_eff * out_elem, row_stride=ld)
    return k


def _persistent_gemm_kernel(wl, name: str, M: int, N: int, K: int, c: GemmConfig, a: int, b: int, out: int,
                            cta0: int, ctas: int, tiles_per_cta: int):
    """CTAs cta0 .. cta0+ctas-1 of a persistent GEMM of c.grid CTAs, each computing
    `tiles_per_cta` tiles: CTA cta = cta0 + bx takes tile t = cta + grid*L0 (row-major over the
    (M/tm) x (N/tn) tiles) in loop L0; the K loop is L1. Tile row floor(t / gx) is a quotient
    term, so every load and store addresses the right tile (the L2 model sees the real reuse)."""
    gx = math.ceil(N / c.tn)
    G = c.grid
    k = wl.kernels.add(name=name, grid_x=ctas, grid_y=1, threads_per_block=c.threads, regs_per_thread=168,
                       smem_bytes=c.smem)
    p = Program(k)
    kt = max(1, math.ceil(K / TK))
    pre = min(c.stages - 1, kt)
    lda = K * ELEM
    a_rows, b_rows, tm_eff, tn_eff = _tile_rows(M, N, c)

    def tile_addr(row_scale: int, col_scale: int, base: int, k_coef: int):
        """base + row(t) * row_scale + col(t) * col_scale, t = cta0 + bx + G*L0, col = t - gx*row."""
        e = affine(base + cta0 * col_scale, bx=col_scale, loops=(G * col_scale, k_coef))
        e.quotient.add(base=cta0, block_x=1, loop=[G], divisor=gx, scale=row_scale - gx * col_scale)
        return e

    def loads(shift: int):
        off = shift * TK * ELEM
        # A tile: rows of tile row floor(t/gx); B tile (stored [N,K]): rows of tile column t mod gx
        p.ins(isa.LD, is_async=True, buffer=a, addr=tile_addr(c.tm * lda, 0, off, TK * ELEM), rows=a_rows,
              row_bytes=TK * ELEM, row_stride=lda)
        p.ins(isa.LD, is_async=True, buffer=b, addr=tile_addr(0, c.tn * lda, off, TK * ELEM), rows=b_rows,
              row_bytes=TK * ELEM, row_stride=lda)

    p.loop(tiles_per_cta)
    _k_pipeline(p, c, kt, pre, loads)
    ld = N * ELEM
    p.ins(isa.ST, buffer=out, addr=tile_addr(c.tm * ld, c.tn * ELEM, 0, 0), rows=tm_eff, row_bytes=tn_eff * ELEM,
          row_stride=ld)
    p.end()
    return k


def _persistent_gemm(wl, M: int, N: int, K: int, c: GemmConfig, a: int, b: int, out: int) -> None:
    """One persistent launch as two kernels: the first T mod G CTAs own one tile more than the
    rest. They go on two streams, the first at higher priority, so the SMs take CTAs in the
    hardware's order (0, 1, 2, ...) when the grid does not fit at once."""
    tiles = math.ceil(M / c.tm) * math.ceil(N / c.tn)
    q, r = divmod(tiles, c.grid)
    if r:
        _persistent_gemm_kernel(wl, "gemm_persistent_head", M, N, K, c, a, b, out, 0, r, q + 1)
        wl.launches.add(kernel=len(wl.kernels) - 1, stream=0, priority=1)
    if q:
        _persistent_gemm_kernel(wl, "gemm_persistent", M, N, K, c, a, b, out, r, c.grid - r, q)
        wl.launches.add(kernel=len(wl.kernels) - 1, stream=1, priority=0)


# ---------------------------------------------------------------- cuBLAS plans, as recorded
CUBLAS_PLANS_CSV = Path(__file__).resolve().parents[1] / "data" / "measured" / "h100_partitions_kernels.csv"
_NVJET = re.compile(r"nvjet_sm90_tst_(\d+)x(\d+)_(\d+)x(\d+)_(\d+)x(\d+)_[hv]_bz(?:_coop[AB])?(_splitK)?_")


def plan_from_cublas_kernel(kernel: str, grid_ctas: int, M: int, N: int, K: int) -> GemmConfig | None:
    """The GemmConfig of a cuBLAS nvjet kernel (name encodes tile MxN, K step x stages, cluster
    shape, split-K) launched with `grid_ctas` CTAs; None for kernels this builder cannot express.
    A split-K kernel's factor is the number of K slices that fit the grid in one round
    (grid // tiles); finer stream-K-like factors (grid / gcd(tiles, grid)) fitted worse."""
    m = _NVJET.search(kernel)
    if not m or int(m.group(3)) != TK:
        return None
    tm, tn, stages = int(m.group(1)), int(m.group(2)), int(m.group(4))
    cluster = min(2, int(m.group(5)) * int(m.group(6)))
    tiles = math.ceil(M / tm) * math.ceil(N / tn)
    if m.group(7):
        split = max(1, min(grid_ctas // tiles, math.ceil(K / TK)))
        return GemmConfig(tm, tn, split, "dp", stages, cluster)
    if tiles <= grid_ctas:
        return GemmConfig(tm, tn, 1, "dp", stages, cluster)
    if tiles % grid_ctas == 0:
        return GemmConfig(tm, tn, 1, "persistent", stages, cluster, grid=grid_ctas)
    # the tile scheduler balances K iterations over the grid (stream-K): whole rounds of tiles
    # data-parallel, the last partial round split along K over the grid, then a fix-up
    return GemmConfig(tm, tn, 1, "dp_sk", stages, cluster, grid=grid_ctas)


@lru_cache(maxsize=4)
def recorded_cublas_kernels(path: str = str(CUBLAS_PLANS_CSV), partition: str = "132:primary") -> dict:
    """{(name, M, N, K): (kernel name, grid CTAs)} of the GEMM kernel cuBLAS launched for each
    measured shape (scripts/measure/probe_partitions.py; the same in every SM partition)."""
    out = {}
    p = Path(path)
    if not p.is_file():
        return out
    with open(p, newline="") as f:
        for row in csv.DictReader(f):
            if row["partition"] != partition or "nvjet" not in row["kernel"]:
                continue
            dims = [int(x) for x in row["grid"].strip("[]").split(",")]
            out[(row["name"], int(row["M"]), int(row["N"]), int(row["K"]))] = (row["kernel"], math.prod(dims))
    return out


def recorded_cublas_plan(name: str, M: int, N: int, K: int) -> tuple[GemmConfig, str] | None:
    """(config, kernel name) of the recorded cuBLAS launch for this shape, if there is one."""
    rec = recorded_cublas_kernels().get((name, M, N, K))
    if rec is None:
        return None
    cfg = plan_from_cublas_kernel(rec[0], rec[1], M, N, K)
    return (cfg, rec[0]) if cfg else None


RED_ROWS = 32  # rows of a tile one fix-up block sums


def _reduce_kernel(wl, name: str, M: int, N: int, c: GemmConfig, ws: int, out: int, split: int,
                   tiles: tuple[int, int], tile0: int = 0, tail: bool = False):
    """Split-K fix-up: block (sub, tile) sums RED_ROWS rows of one tile's `split` fp32 partials.
    Linear block b belongs to tile b // (tm / RED_ROWS) (the dependency's scale)."""
    gx = math.ceil(N / c.tn)
    col0, row0 = tile0 % gx, tile0 // gx
    subs = c.tm // RED_ROWS
    ntiles = tiles[0] * tiles[1]
    rk = wl.kernels.add(name=name, grid_x=subs, grid_y=ntiles, threads_per_block=256, regs_per_thread=32)
    p = Program(rk)
    # tile t = by: column t % gx (affine only within a row: tail tiles and full grids both use
    # bx-major order, so we approximate the column by the tile index modulo the row length).
    base4 = row0 * c.tm * N * 4 + col0 * c.tn * 4
    p.loop(split)
    p.ins(isa.LD, is_async=True, buffer=ws,
          addr=affine(base4, bx=RED_ROWS * N * 4, by=c.tn * 4, loops=(M * N * 4,), mod=M * N * 4 * split),
          rows=RED_ROWS, row_bytes=c.tn * 4, row_stride=N * 4)
    p.end()
    p.ins(isa.WAIT, count=0)
    p.ins(isa.ALU, elements=RED_ROWS * c.tn * split, flops_per_element=1.0)
    p.ins(isa.ST, buffer=out, addr=affine(row0 * c.tm * N * ELEM + col0 * c.tn * ELEM, bx=RED_ROWS * N * ELEM,
                                          by=c.tn * ELEM, mod=M * N * ELEM),
          rows=RED_ROWS, row_bytes=c.tn * ELEM, row_stride=N * ELEM)
    return rk


def gemm(M: int, N: int, K: int, num_sms: int = 132, config: GemmConfig | None = None,
         params: GpuParams | dict | None = None, name: str | None = None):
    """A single-GPU bf16 GEMM C[M,N] = A[M,K] x B[K,N] (cuBLAS-like tiling, waves over the SMs).

    `num_sms` is the SM count the library plans for (cuBLAS plans for the device's SMs even
    inside a green context; a stream-K tail is sized for it)."""
    c = config or choose_gemm(M, N, K, num_sms, params)
    wl = new_workload(name or f"gemm_{M}x{N}x{K}")
    a = add_buffer(wl, "A", M * K * ELEM)
    b = add_buffer(wl, "B", N * K * ELEM)
    out = add_buffer(wl, "C", M * N * ELEM)
    gx, gy = math.ceil(N / c.tn), math.ceil(M / c.tm)
    if c.schedule == "persistent":
        _persistent_gemm(wl, M, N, K, c, a, b, out)
        return wl
    if c.schedule == "dp" and c.split == 1:
        _gemm_kernel(wl, "gemm", M, N, K, 0, K, c, a, b, out, ELEM)
        wl.launches.add(kernel=0, stream=0)
        return wl
    if c.schedule == "dp":
        split, grid, tile0, tail = c.split, None, 0, False
    else:
        rows_dp, ntail, split = _tail(M, N, num_sms, c)
        grid, tile0, tail = (ntail, 1), rows_dp * gx, True
        if rows_dp:
            k = _gemm_kernel(wl, "gemm_dp", M, N, K, 0, K, c, a, b, out, ELEM)
            k.grid_y = rows_dp
            wl.launches.add(kernel=len(wl.kernels) - 1, stream=0, priority=1)
    ws = add_buffer(wl, "workspace", split * M * N * 4, dtype=isa.FP32)
    kl = math.ceil(math.ceil(K / split) / TK) * TK
    slices = []
    for s in range(split):
        k0 = s * kl
        if k0 >= K:
            break
        _gemm_kernel(wl, f"gemm_slice{s}", M, N, K, k0, min(kl, K - k0), c, a, b, ws, 4, out_base=s * M * N * 4,
                     grid=grid, tile0=tile0)
        wl.launches.add(kernel=len(wl.kernels) - 1, stream=1 + s)
        slices.append(len(wl.launches) - 1)
    _reduce_kernel(wl, "splitk_reduce", M, N, c, ws, out, len(slices), grid or (gx, gy), tile0, tail)
    la = wl.launches.add(kernel=len(wl.kernels) - 1, stream=1 + split, priority=-1)
    for li in slices:  # fix-up block b waits for its tile's block in every slice (TB-level dependency)
        la.deps.add(producer=li, scale_num=1, scale_den=c.tm // RED_ROWS, lo=0, hi=0)
    return wl


# ---------------------------------------------------------------- layernorm
def layernorm(M: int, N: int, rows_per_block: int = 1, threads: int = 512, name: str | None = None):
    """Row-wise layernorm like PyTorch's vectorized kernel: one block (512 threads, so 4 per SM)
    per row; pass 1 reads the row and reduces mean and variance (Welford), pass 2 reads it again
    (an L2 hit) with weight and bias, normalises and writes the row. Blocking loads make it
    latency bound per SM (4 rows in flight), as the measured kernels are at partial SM counts."""
    wl = new_workload(name or f"layernorm_{M}x{N}")
    x = add_buffer(wl, "x", M * N * ELEM)
    y = add_buffer(wl, "y", M * N * ELEM)
    wb = add_buffer(wl, "weight_bias", 2 * N * ELEM)
    k = wl.kernels.add(name="layernorm", grid_x=math.ceil(M / rows_per_block), grid_y=1, threads_per_block=threads,
                       regs_per_thread=32)
    p = Program(k)
    row = N * ELEM
    p.ins(isa.LD, buffer=x, addr=affine(0, bx=rows_per_block * row), rows=rows_per_block, row_bytes=row)
    p.ins(isa.ALU, elements=rows_per_block * N, flops_per_element=4.0)
    p.ins(isa.LD, buffer=wb, addr=affine(0), rows=1, row_bytes=2 * row, is_async=True)
    p.ins(isa.LD, buffer=x, addr=affine(0, bx=rows_per_block * row), rows=rows_per_block, row_bytes=row)
    p.ins(isa.ALU, elements=rows_per_block * N, flops_per_element=4.0)
    p.ins(isa.ST, buffer=y, addr=affine(0, bx=rows_per_block * row), rows=rows_per_block, row_bytes=row)
    wl.launches.add(kernel=0, stream=0)
    return wl


# ---------------------------------------------------------------- attention
def attention(BH: int, S: int, D: int, causal: bool = True, name: str | None = None):
    """FlashAttention-style forward: one block per (128-query tile, batch x head); the K/V loop
    streams 128-key tiles (QK^T mma, softmax on the ALUs, PV mma). Causal: a query tile visits
    the key tiles up to its own, modelled as the average half (S/128+1)/2 tiles per block."""
    wl = new_workload(name or f"attention_{BH}x{S}x{D}")
    q = add_buffer(wl, "q", BH * S * D * ELEM)
    kv = add_buffer(wl, "kv", 2 * BH * S * D * ELEM)
    o = add_buffer(wl, "o", BH * S * D * ELEM)
    tq = 128
    nt = math.ceil(S / tq)
    trips = (nt + 1) // 2 if causal else nt
    dp = max(16, math.ceil(D / 16) * 16)
    k = wl.kernels.add(name="flash_fwd", grid_x=nt, grid_y=BH, threads_per_block=256, regs_per_thread=224,
                       smem_bytes=(tq * dp + 4 * tq * dp) * ELEM)
    p = Program(k)
    row = D * ELEM
    p.ins(isa.LD, buffer=q, addr=affine(0, bx=tq * row, by=S * row), rows=tq, row_bytes=row)
    p.loop(trips)
    p.ins(isa.LD, buffer=kv, is_async=True, addr=affine(0, by=2 * S * row, loops=(tq * row,)), rows=tq, row_bytes=row)
    p.ins(isa.LD, buffer=kv, is_async=True, addr=affine(S * row, by=2 * S * row, loops=(tq * row,)), rows=tq, row_bytes=row)
    p.ins(isa.WAIT, count=0)
    p.ins(isa.MMA, m=tq, n=tq, k=dp, dtype=isa.BF16)
    p.ins(isa.ALU, elements=tq * tq, flops_per_element=6.0)
    p.ins(isa.MMA, m=tq, n=dp, k=tq, dtype=isa.BF16)
    p.end()
    p.ins(isa.ST, buffer=o, addr=affine(0, bx=tq * row, by=S * row), rows=tq, row_bytes=row)
    wl.launches.add(kernel=0, stream=0)
    return wl


# ---------------------------------------------------------------- multi-GPU: AG-GEMM
def ag_gemm(M: int, N: int, K: int, gpus: int = 8, mode: str = "cais", tm: int = 128, tn: int = 128,
            sms: int | None = None, functional: bool = False):
    """All-gather + GEMM with tensor parallelism: the activation A [M,K] is row-sharded over the
    GPUs (GPU r owns rows [r*M/G, (r+1)*M/G)); every GPU multiplies the whole A by its own weight
    shard B_r [K, N]. Blocks with the same blockIdx on every GPU read the same A tile from its
    owner (a GPU-invariant address: the CAIS compiler turns those loads into ld.cais and puts the
    blocks in one TB group). mode: 'cais' (ld.cais + group sync), 'remote' (plain remote loads).

    A tile's owner is by // (M/G/tm); the loads of rows a GPU owns are local."""
    assert M % (gpus * tm) == 0 and N % tn == 0 and K % TK == 0
    wl = new_workload(f"ag_gemm_{mode}_{M}x{N}x{K}", gpus, functional)
    a = add_buffer(wl, "A_shard", M // gpus * K * ELEM)
    b = add_buffer(wl, "B", K * N * ELEM)
    out = add_buffer(wl, "C", M * N * ELEM)
    gx, gy = N // tn, M // tm
    k = wl.kernels.add(name=f"ag_gemm_{mode}", grid_x=gx, grid_y=gy, threads_per_block=256, regs_per_thread=168,
                       smem_bytes=2 * (tm + tn) * TK * ELEM)
    if mode == "cais":
        k.cais.enabled = True
        k.cais.num_gpus = gpus
        k.cais.group_base = 1
        k.cais.pre_launch_sync = True
        k.cais.pre_access_sync = False
    p = Program(k)
    lda = K * ELEM
    tiles_per_owner = M // gpus // tm
    op = isa.LD_CAIS if mode == "cais" else isa.LD_REMOTE
    # Owner of row tile `by` is by // tiles_per_owner: affine only per owner, so the builder
    # emits one kernel per owner range? No: we use one kernel per owner, launched together.
    del k
    wl.ClearField("kernels")
    for owner in range(gpus):
        kk = wl.kernels.add(name=f"ag_gemm_{mode}_owner{owner}", grid_x=gx, grid_y=tiles_per_owner,
                            threads_per_block=256, regs_per_thread=168, smem_bytes=2 * (tm + tn) * TK * ELEM)
        if mode == "cais":
            kk.cais.enabled = True
            kk.cais.num_gpus = gpus
            kk.cais.group_base = 1 + owner * gx * tiles_per_owner
            kk.cais.pre_launch_sync = True
        p = Program(kk)
        p.loop(K // TK)
        p.ins(op, is_async=True, buffer=a, peer=affine(owner), addr=affine(0, by=tm * lda, loops=(TK * ELEM,)),
              rows=tm, row_bytes=TK * ELEM, row_stride=lda)
        p.ins(isa.LD, is_async=True, buffer=b, addr=affine(0, bx=tn * ELEM, loops=(TK * N * ELEM,)), rows=TK,
              row_bytes=tn * ELEM, row_stride=N * ELEM)
        p.ins(isa.WAIT, count=0)
        p.ins(isa.MMA, m=tm, n=tn, k=TK, dtype=isa.BF16)
        p.end()
        p.ins(isa.ST, buffer=out, addr=affine(owner * tiles_per_owner * tm * N * ELEM, bx=tn * ELEM, by=tm * N * ELEM),
              rows=tm, row_bytes=tn * ELEM, row_stride=N * ELEM)
        la = wl.launches.add(kernel=owner, stream=owner)
        if sms:
            la.sm_count = sms
    return wl


def ag_gemm_remote_bytes(M: int, N: int, K: int, gpus: int, tn: int = 128, mode: str = "cais") -> dict[str, int]:
    """Analytical NVLink payload bytes of ag_gemm (summed over GPUs).

    Every GPU's blocks load every remote A tile once per N-column of blocks (gx = N/tn times).
    'remote': owner -> requesters response bytes = (G-1) x owner shard x gx for each owner.
    'cais': the switch merges the G-1 requests for one line: the owner sends each line once."""
    gx = N // tn
    shard = M // gpus * K * ELEM
    requesters = gpus - 1
    per_owner_unmerged = requesters * shard * gx
    per_owner_merged = shard * gx
    return {
        "owner_egress_bytes": gpus * (per_owner_merged if mode == "cais" else per_owner_unmerged),
        "requester_ingress_bytes": gpus * per_owner_unmerged,
    }
