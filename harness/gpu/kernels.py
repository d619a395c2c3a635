"""Kernel builders: the GEMM as tile-ISA programs (proto/isa.proto), and the program helpers every
builder uses. LayerNorm and attention are in norm_attention.py, the multi-GPU AG-GEMM of the
CAIS tests in ag_gemm.py, cuBLAS's recorded plans in cublas_plans.py.

GEMM follows CUTLASS/cuBLAS on Hopper: a block computes one TM x TN output tile with a K loop of
64-wide steps; a multistage pipeline (``stages``) keeps stages-1 steps of async tile loads ahead
of the tensor cores; 2-CTA clusters multicast the shared operand (each CTA loads half of it);
the grid runs in waves over the SMs (one 192 KB-smem block per SM). The tile shape and split-K
factor are chosen per shape by :func:`choose_gemm` from an analytical estimate, as cuBLAS's
heuristics do; split-K runs the K slices as concurrent launches followed by a reduction kernel.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields

from harness.gpu import power
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
    """Appends instructions to a kernel's program, or with `group` to a new warp group of that name
    run by `warps` warps (a warp-specialised CTA runs its groups' programs side by side:
    isa.proto Kernel.warp_groups)."""

    def __init__(self, kernel, group: str | None = None, warps: int = 0):
        self.k = kernel
        if group is None:
            self.instrs = kernel.program
        else:
            if warps <= 0:
                raise ValueError(f"kernel {kernel.name!r}: warp group {group!r} needs its warps (> 0)")
            self.instrs = kernel.warp_groups.add(name=group, warps=warps).program

    def ins(self, op, **kw):
        i = self.instrs.add(op=op)
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
    """Tile shape, schedule and pipeline of one GEMM (tiles of tm x tn outputs, K in 64-wide steps).

    schedule 'dp': one block per tile, the hardware hands blocks to SMs as they free up; with
      split > 1 the K range is cut into `split` concurrent slice kernels and a reduction kernel
      whose blocks wait for their tile's slices (classic split-K).
    schedule 'streamk': cuBLAS's persistent launch of `grid` CTAs (sized for the whole device) as
      the CUTLASS stream-K hybrid: the first (tiles // grid) * grid tiles data-parallel, the
      remaining tiles' K iterations split into `grid` equal contiguous ranges, one per CTA (static:
      CTA c always owns range c), and the partial tiles summed in-kernel (fixup 'inline') or by a
      separate reduction kernel (fixup 'reduce': cuBLAS's splitK kernels + splitKreduce).
    schedule 'persistent': `grid` CTAs, CTA c computes tiles c, c + grid, ... (CUTLASS's static
      persistent scheduler); inside a smaller SM partition the CTAs run in rounds.
    cluster: CTAs that share the larger operand by TMA multicast (1 or 2); cluster_ctas: the
    kernel's thread-block cluster (recorded 1x2, 2x1, 2x2, 2x4), which limits how many CTAs are
    resident where clusters of 4 or more are scarce (gpu.max_clusters_4)."""

    tm: int
    tn: int
    split: int = 1
    schedule: str = "dp"
    stages: int = 4
    cluster: int = 2
    grid: int = 0
    fixup: str = "inline"
    cluster_ctas: int = 0

    @property
    def smem(self) -> int:
        return self.stages * (self.tm + self.tn) * TK * ELEM

    @property
    def threads(self) -> int:
        return 384 if self.tm * self.tn >= 128 * 256 else 256

    def describe(self) -> str:
        if self.schedule == "streamk":
            return f"{self.tm}x{self.tn} streamk grid{self.grid}" + (" +reduce" if self.fixup == "reduce" else "")
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


def streamk_split(M: int, N: int, K: int, c: GemmConfig) -> dict:
    """How a stream-K launch of c.grid CTAs divides the work: q = tiles // grid whole tiles per
    CTA data-parallel (tiles 0 .. q*grid-1), then the K iterations of the last `sk_tiles` tiles
    (sk_tiles * kt, flattened tile-major) in grid contiguous ranges: CTAs 0 .. head-1 get w + 1
    iterations, the others w. `pieces` counts the (CTA, tile) pairs of those ranges: the partial
    tiles a fix-up sums."""
    gx, gy = math.ceil(N / c.tn), math.ceil(M / c.tm)
    tiles, kt, G = gx * gy, max(1, math.ceil(K / TK)), c.grid
    q, sk_tiles = divmod(tiles, G)
    w, head = divmod(sk_tiles * kt, G)
    pieces, j = 0, 0
    for cta in range(G):
        n = w + (1 if cta < head else 0)
        if n:
            pieces += (j + n - 1) // kt - j // kt + 1
        j += n
    return dict(gx=gx, gy=gy, tiles=tiles, kt=kt, q=q, sk_tiles=sk_tiles, w=w, head=head, pieces=pieces)


def estimate_gemm_us(M: int, N: int, K: int, num_sms: int, c: GemmConfig, p: GpuParams | dict | None = None) -> float:
    """Analytical time of one configuration on num_sms SMs (the heuristic's cost model, not the
    simulation)."""
    p = _params(p)
    clk = (p.clock_mhz if p.clock_mhz > 0 else power.settled_clock_mhz(num_sms, "tensor", asdict(p))) * 1e6
    gx, gy = math.ceil(N / c.tn), math.ceil(M / c.tm)
    kts = math.ceil(K / TK)
    mma_s = 2 * c.tm * c.tn * TK / (p.tc_flops_per_cycle_per_sm * p.tc_efficiency * clk)
    step_bytes = (min(c.tm, c.tn) + max(c.tm, c.tn) / c.cluster) * TK * ELEM
    hbm = p.hbm_bw_gbps * p.hbm_efficiency * 1e9
    fixed = p.tb_overhead_ns * 1e-9 + (p.l2_latency_ns + p.hbm_latency_ns) * 1e-9

    def step(active: int) -> float:
        return max(mma_s, active * step_bytes / (p.l2_bw_gbps * 1e9), step_bytes / (p.sm_load_bytes_per_cycle * clk))

    def waves(blocks: int, kt: int) -> float:
        full, rem = divmod(blocks, num_sms)
        t = full * (kt * step(num_sms) + fixed)
        if rem:
            t += kt * step(rem) + fixed
        return t

    reduce_s = 0.0
    if c.schedule == "streamk":
        sk = streamk_split(M, N, K, c)
        t = waves(sk["q"] * c.grid, kts)
        if sk["sk_tiles"]:  # every CTA's range, in rounds when the grid exceeds the SMs
            t += math.ceil(c.grid / num_sms) * ((sk["w"] + 1) * step(min(c.grid, num_sms)) + fixed)
            reduce_s = 2 * (sk["pieces"] - sk["sk_tiles"]) * c.tm * c.tn * 4 / hbm
    elif c.schedule == "persistent":
        t = math.ceil(c.grid / num_sms) * math.ceil(gx * gy / c.grid) * (kts * step(min(c.grid, num_sms)) + fixed)
    else:
        t = waves(gx * gy * c.split, math.ceil(kts / c.split))
        if c.split > 1:
            reduce_s = (M * N * 4 * c.split + M * N * ELEM) / hbm + p.tb_overhead_ns * 1e-9
    t = max(t, (M * K + N * K + M * N) * ELEM / hbm) + reduce_s
    return t * 1e6 + p.kernel_launch_ns * 1e-3


def candidates(M: int, N: int, K: int, num_sms: int, device_sms: int | None = None) -> list[GemmConfig]:
    """Tile shapes x (split-K factors, or a stream-K launch of device_sms CTAs when there are more
    tiles than that, as cuBLAS plans for the whole device)."""
    out = []
    for tm, tn in CANDIDATE_TILES:
        tiles = math.ceil(M / tm) * math.ceil(N / tn)
        for s in CANDIDATE_SPLITS:
            if s > 1 and (K // s < 512 or tiles >= num_sms):
                continue
            out.append(GemmConfig(tm, tn, s))
        if device_sms and tiles > device_sms:
            out.append(GemmConfig(tm, tn, 1, "streamk", grid=device_sms))
        elif device_sms and 2 * tiles <= device_sms and K >= 2048:
            out.append(GemmConfig(tm, tn, 1, "streamk", grid=device_sms // tiles * tiles, fixup="reduce"))
    return out


def choose_gemm(M: int, N: int, K: int, num_sms: int, p: GpuParams | dict | None = None,
                device_sms: int | None = None) -> GemmConfig:
    """The fastest candidate by estimate_gemm_us on num_sms SMs (the heuristic for shapes without a
    recorded cuBLAS plan). device_sms: the SMs the library plans its grids for (the whole GPU,
    also inside an SM partition); None plans only data-parallel and split-K launches."""
    best = None
    for c in candidates(M, N, K, num_sms, device_sms):
        t = estimate_gemm_us(M, N, K, num_sms, c, p)
        if best is None or t < best[0] - 1e-9:
            best = (t, c)
    return best[1]


def _tile_rows(M: int, N: int, c: GemmConfig) -> tuple[int, int, int, int]:
    """(A rows, B rows) one CTA loads per K step, and the tile's mean in-bounds extent (rows,
    columns).

    Edge tiles hang over the matrix: TMA fills the overhang with zeros without memory traffic,
    so loads and stores move the tile's mean in-bounds extent (M / tile rows, N / tile columns).
    TMA multicast in a 2-CTA cluster: the CTAs share the larger operand, each loads half (the
    recorded kernels' other cluster shapes, 2x2 and 2x4, were tried as per-axis sharing: it
    fitted worse)."""
    tm_eff = min(c.tm, math.ceil(M / math.ceil(M / c.tm)))
    tn_eff = min(c.tn, math.ceil(N / math.ceil(N / c.tn)))
    a_rows = max(1, tm_eff // c.cluster) if c.tm > c.tn else tm_eff
    b_rows = max(1, tn_eff // b_sharing(c))
    return a_rows, b_rows, tm_eff, tn_eff


def b_sharing(c: GemmConfig) -> int:
    """CTAs of a cluster that share (TMA-multicast) one B tile, each loading its part: the
    cluster where B is the larger operand (tm <= tn), else 1."""
    return c.cluster if c.tm <= c.tn else 1


def _mma_shape(M: int, N: int, c: GemmConfig) -> tuple[int, int]:
    """The (m, n) of one K step's mma, averaged over the tiles: the rows in 64-row blocks (a
    wgmma's M; a block wholly out of bounds is skipped, a 96-row tile costs two blocks) by the
    in-bounds columns rounded up to 8 (the wgmma N granule). The recorded kernels show edge
    tiles costing their in-bounds extent, not the whole tile: cuBLAS picks a 128x160 tile for
    N = 512 (25 % overhang) and runs it faster than the overhang would allow at its clock."""
    gy = math.ceil(M / c.tm)
    last = M - (gy - 1) * c.tm
    m = round(((gy - 1) * math.ceil(c.tm / 64) + math.ceil(last / 64)) * 64 / gy)
    tn_eff = _tile_rows(M, N, c)[3]
    return m, min(c.tn, math.ceil(tn_eff / 8) * 8)


def _k_pipeline(p: Program, c: GemmConfig, steps: int, pre: int, loads, mma: tuple[int, int]) -> None:
    """A K loop of `steps` steps: `pre` steps of async loads ahead (prologue), then load step
    i + pre while the tensor cores work on step i, then drain the last `pre` steps.
    `loads(shift)` emits the loads of step L + shift of the innermost loop L."""
    mm, mn = mma
    p.loop(pre)
    loads(0)
    p.end()
    if steps > pre:
        p.loop(steps - pre)
        loads(pre)
        p.ins(isa.WAIT, count=2 * pre)
        p.ins(isa.MMA, m=mm, n=mn, k=TK, dtype=isa.BF16)
        p.end()
    p.loop(pre)
    p.ins(isa.WAIT, count=0)
    p.ins(isa.MMA, m=mm, n=mn, k=TK, dtype=isa.BF16)
    p.end()


def _gemm_kernel(wl, name: str, M: int, N: int, K: int, k0: int, kl: int, c: GemmConfig, a: int, b: int,
                 out: int, out_elem: int, out_base: int = 0):
    """One GEMM kernel over the K range [k0, k0+kl), a (N/tn, M/tm) grid of tiles: A [M,K]
    row-major, B stored [N,K] (NT)."""
    gx, gy = math.ceil(N / c.tn), math.ceil(M / c.tm)
    k = wl.kernels.add(name=name, grid_x=gx, grid_y=gy, threads_per_block=c.threads, regs_per_thread=168,
                       smem_bytes=c.smem, cluster_ctas=c.cluster_ctas, holds_carveout=True)
    p = Program(k)
    kt = max(1, math.ceil(kl / TK))
    lda = K * ELEM
    a_rows, b_rows, tm_eff, tn_eff = _tile_rows(M, N, c)

    def loads(shift: int):
        off = (k0 + shift * TK) * ELEM
        p.ins(isa.LD, is_async=True, buffer=a, addr=affine(off, by=c.tm * lda, loops=(TK * ELEM,)), rows=a_rows,
              row_bytes=TK * ELEM, row_stride=lda)
        p.ins(isa.LD, is_async=True, buffer=b, addr=affine(off, bx=c.tn * lda, loops=(TK * ELEM,)), rows=b_rows,
              row_bytes=TK * ELEM, row_stride=lda)

    _k_pipeline(p, c, kt, min(c.stages - 1, kt), loads, _mma_shape(M, N, c))
    ld = N * out_elem
    p.ins(isa.ST, buffer=out, addr=affine(out_base, bx=c.tn * out_elem, by=c.tm * ld), rows=tm_eff,
          row_bytes=tn_eff * out_elem, row_stride=ld)
    return k


def _tile_term(e, divisor: int, scale: int, base: int = 0, bx: int = 0, loop: tuple[int, ...] = ()):
    """Add scale * floor((base + bx*blockIdx.x + sum(loop[i]*L_i)) / divisor) to affine e."""
    if scale:
        e.quotient.add(base=base, block_x=bx, loop=list(loop), divisor=divisor, scale=scale)
    return e


def _linear_gemm_kernel(wl, name: str, M: int, N: int, K: int, c: GemmConfig, a: int, b: int, out: int, tiles: int,
                        ctas: int = 0):
    """Tiles 0 .. tiles-1 (row-major over the (M/tm) x (N/tn) tiles), one per logical block of a
    (tiles, 1) grid: tile row floor(bx / gx) is a quotient term. With `ctas`, a persistent launch
    of that many CTAs, each starting with its own tile and then taking the next tile not yet
    taken (engine: dynamic_blocks); they hold their SMs (a 2-CTA cluster its TPC) until no tile
    is left."""
    gx = math.ceil(N / c.tn)
    k = wl.kernels.add(name=name, grid_x=tiles, grid_y=1, threads_per_block=c.threads, regs_per_thread=168,
                       smem_bytes=c.smem, cluster_ctas=c.cluster_ctas, holds_carveout=True, persistent=bool(ctas), ctas=ctas,
                       dynamic_blocks=bool(ctas))
    p = Program(k)
    kt = max(1, math.ceil(K / TK))
    lda, step = K * ELEM, TK * ELEM
    a_rows, b_rows, tm_eff, tn_eff = _tile_rows(M, N, c)

    def tile_addr(row_scale: int, col_scale: int, base: int, k_coef: int):
        """base + row(t) row_scale + col(t) col_scale, t = bx, col = t - gx row."""
        return _tile_term(affine(base, bx=col_scale, loops=(k_coef,)), gx, row_scale - gx * col_scale, bx=1)

    def loads(shift: int):
        p.ins(isa.LD, is_async=True, buffer=a, addr=tile_addr(c.tm * lda, 0, shift * step, step), rows=a_rows,
              row_bytes=step, row_stride=lda)
        p.ins(isa.LD, is_async=True, buffer=b, addr=tile_addr(0, c.tn * lda, shift * step, step), rows=b_rows,
              row_bytes=step, row_stride=lda)

    _k_pipeline(p, c, kt, min(c.stages - 1, kt), loads, _mma_shape(M, N, c))
    ld = N * ELEM
    p.ins(isa.ST, buffer=out, addr=tile_addr(c.tm * ld, c.tn * ELEM, 0, 0), rows=tm_eff, row_bytes=tn_eff * ELEM,
          row_stride=ld)
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
                       smem_bytes=c.smem, cluster_ctas=c.cluster_ctas, holds_carveout=True)
    p = Program(k)
    kt = max(1, math.ceil(K / TK))
    lda, step = K * ELEM, TK * ELEM
    a_rows, b_rows, tm_eff, tn_eff = _tile_rows(M, N, c)

    def tile_addr(row_scale: int, col_scale: int, base: int, k_coef: int):
        """base + row(t) * row_scale + col(t) * col_scale, t = cta0 + bx + G*L0, col = t - gx*row."""
        e = affine(base + cta0 * col_scale, bx=col_scale, loops=(G * col_scale, k_coef))
        return _tile_term(e, gx, row_scale - gx * col_scale, base=cta0, bx=1, loop=(G,))

    def loads(shift: int):
        p.ins(isa.LD, is_async=True, buffer=a, addr=tile_addr(c.tm * lda, 0, shift * step, step), rows=a_rows,
              row_bytes=step, row_stride=lda)
        p.ins(isa.LD, is_async=True, buffer=b, addr=tile_addr(0, c.tn * lda, shift * step, step), rows=b_rows,
              row_bytes=step, row_stride=lda)

    p.loop(tiles_per_cta)
    _k_pipeline(p, c, kt, min(c.stages - 1, kt), loads, _mma_shape(M, N, c))
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


def _streamk_kernel(wl, name: str, M: int, N: int, K: int, c: GemmConfig, a: int, b: int, out: int, ws: int,
                    sk: dict, cta0: int, ctas: int, w: int, j0: int):
    """CTAs cta0 .. cta0+ctas-1 of the stream-K part (streamk_split): CTA cta0 + bx runs the K
    iterations j = j0 + w*bx + i (i < w) of the flattened (tile, k step) space: tile
    t = floor(j / kt), k step j - kt t, tile row floor(j / (kt gx)), column t - gx row, all
    quotient terms, so each load addresses the right tile and k step for the L2 model. Then it
    writes its partial tile(s) to the workspace; fix-up 'inline' (CUTLASS stream-K): it reads a
    peer's partial back and writes its share of the finished tiles to C; fix-up 'reduce': a
    separate reduction kernel does that."""
    gx, kt, G = sk["gx"], sk["kt"], c.grid
    k = wl.kernels.add(name=name, grid_x=ctas, grid_y=1, threads_per_block=c.threads, regs_per_thread=168,
                       smem_bytes=c.smem, cluster_ctas=c.cluster_ctas, holds_carveout=True)
    p = Program(k)
    lda, step = K * ELEM, TK * ELEM
    a_rows, b_rows, tm_eff, tn_eff = _tile_rows(M, N, c)

    def flat_addr(row_scale: int, col_scale: int, k_scale: int, shift: int, loop: tuple[int, ...]):
        """row(t) row_scale + col(t) col_scale + kstep k_scale at j = j0 + shift + w bx + loop.L."""
        jb = j0 + shift
        e = affine(jb * k_scale, bx=w * k_scale, loops=tuple(x * k_scale for x in loop))
        _tile_term(e, kt, col_scale - kt * k_scale, base=jb, bx=w, loop=loop)
        return _tile_term(e, kt * gx, row_scale - gx * col_scale, base=jb, bx=w, loop=loop)

    def loads(shift: int):
        p.ins(isa.LD, is_async=True, buffer=a, addr=flat_addr(c.tm * lda, 0, step, shift, (1,)), rows=a_rows,
              row_bytes=step, row_stride=lda)
        p.ins(isa.LD, is_async=True, buffer=b, addr=flat_addr(0, c.tn * lda, step, shift, (1,)), rows=b_rows,
              row_bytes=step, row_stride=lda)

    _k_pipeline(p, c, w, min(c.stages - 1, w), loads, _mma_shape(M, N, c))
    tile_ws = c.tm * c.tn * 4
    ws_addr = affine(cta0 * tile_ws, bx=tile_ws)
    ws_row = tn_eff * 4
    if c.fixup == "reduce":  # every piece to the workspace
        rows = max(1, round(tm_eff * sk["pieces"] / G))
        p.ins(isa.ST, buffer=ws, addr=ws_addr, rows=rows, row_bytes=ws_row, row_stride=ws_row)
    else:  # pieces that do not finish their tile to the workspace; finishing CTAs add them and store
        rows = max(1, round(tm_eff * (sk["pieces"] - sk["sk_tiles"]) / G))
        p.ins(isa.ST, buffer=ws, addr=ws_addr, rows=rows, row_bytes=ws_row, row_stride=ws_row)
        p.ins(isa.LD, buffer=ws, addr=ws_addr, rows=rows, row_bytes=ws_row, row_stride=ws_row)
        p.ins(isa.ST, buffer=out, addr=flat_addr(c.tm * N * ELEM, c.tn * ELEM, 0, 0, ()),
              rows=max(1, round(tm_eff * sk["sk_tiles"] / G)), row_bytes=tn_eff * ELEM, row_stride=N * ELEM)
    return k


def _streamk_reduce_kernel(wl, name: str, M: int, N: int, K: int, c: GemmConfig, ws: int, out: int, sk: dict, j_sk: int):
    """cuBLAS's splitKreduce after a split-K stream-K launch: block b reads back the partial
    tiles CTA b wrote (the same addresses: L2 hits while they fit), sums and writes its share
    of the output tiles (sk_tiles / grid tiles, at CTA b's first tile)."""
    G, gx, kt, w = c.grid, sk["gx"], sk["kt"], max(sk["w"], 1)
    _, _, tm_eff, tn_eff = _tile_rows(M, N, c)
    rk = wl.kernels.add(name=name, grid_x=G, grid_y=1, threads_per_block=256, regs_per_thread=32)
    p = Program(rk)
    rows = max(1, round(tm_eff * sk["pieces"] / G))
    tile_ws, ws_row = c.tm * c.tn * 4, tn_eff * 4
    p.ins(isa.LD, buffer=ws, addr=affine(0, bx=tile_ws), rows=rows, row_bytes=ws_row, row_stride=ws_row)
    p.ins(isa.ALU, elements=rows * tn_eff, flops_per_element=1.0)
    ld = N * ELEM
    e = affine(0)  # CTA b's first tile t = floor((j_sk + w b) / kt): t tn + row(t) (tm ld - gx tn)
    _tile_term(e, kt, c.tn * ELEM, base=j_sk, bx=w)
    _tile_term(e, kt * gx, c.tm * ld - gx * c.tn * ELEM, base=j_sk, bx=w)
    p.ins(isa.ST, buffer=out, addr=e, rows=max(1, round(tm_eff * sk["sk_tiles"] / G)), row_bytes=tn_eff * ELEM,
          row_stride=ld)
    return rk


def _streamk_gemm(wl, M: int, N: int, K: int, c: GemmConfig, a: int, b: int, out: int) -> None:
    """A stream-K launch of c.grid CTAs (streamk_split), persistent as cuBLAS's: the CTAs share
    out the data-parallel tiles (each takes the next tile left, engine: dynamic_blocks), holding
    their SMs (a 2-CTA cluster its TPC) meanwhile, then each runs its static stream-K range on
    the same SM (engine: Launch.continues), as (up to) two kernels: CTAs 0 .. head-1 with one
    iteration more than the rest. CTAs the SMs cannot hold start when a resident one has left.
    So inside an SM partition smaller than the grid the kernel runs in rounds of tiles, not of
    CTAs (measured: a 132-CTA launch of 8 tiles per CTA takes ~1.3x, not 2x, as long on 128 SMs
    as on 132), and beside another kernel it keeps its SMs until its tiles run out (the
    streaming kernels of validate_concurrent start only then). With fix-up 'reduce' a reduction
    kernel follows, its blocks waiting for all the CTAs."""
    sk = streamk_split(M, N, K, c)
    G, w, head, kt, q = c.grid, sk["w"], sk["head"], sk["kt"], sk["q"]
    mains = []
    dp = -1
    if q:
        _linear_gemm_kernel(wl, "gemm_dp", M, N, K, c, a, b, out, q * G, ctas=G)
        wl.launches.add(kernel=len(wl.kernels) - 1, stream=0, priority=2)
        dp = len(wl.launches) - 1
        mains.append(dp)
    if not sk["sk_tiles"]:
        return
    split = max(1, math.ceil(sk["pieces"] / sk["sk_tiles"]))
    ws = add_buffer(wl, "workspace", max(G * c.tm * c.tn * 4, M * N * 4 * split), dtype=isa.FP32)
    j_sk = q * G * kt
    def continues(cta0: int) -> dict:  # the data-parallel CTAs go on with their stream-K ranges
        return dict(continues=dp + 1, continue_offset=cta0) if dp >= 0 else {}

    if head:
        _streamk_kernel(wl, "gemm_streamk_head", M, N, K, c, a, b, out, ws, sk, 0, head, w + 1, j_sk)
        wl.launches.add(kernel=len(wl.kernels) - 1, stream=1, priority=1, **continues(0))
        mains.append(len(wl.launches) - 1)
    if w:
        _streamk_kernel(wl, "gemm_streamk", M, N, K, c, a, b, out, ws, sk, head, G - head, w, j_sk + head * (w + 1))
        wl.launches.add(kernel=len(wl.kernels) - 1, stream=2, priority=0, **continues(head))
        mains.append(len(wl.launches) - 1)
    if c.fixup == "reduce":
        _streamk_reduce_kernel(wl, "splitk_reduce", M, N, K, c, ws, out, sk, j_sk)
        la = wl.launches.add(kernel=len(wl.kernels) - 1, stream=3, priority=-1)
        for li in mains:
            la.deps.add(producer=li, all_blocks=True)



RED_ROWS = 32  # rows of a tile one fix-up block sums


def _reduce_kernel(wl, name: str, M: int, N: int, c: GemmConfig, ws: int, out: int, split: int,
                   tiles: tuple[int, int]):
    """Split-K reduction: block (sub, tile) sums RED_ROWS rows of one tile's `split` fp32
    partials and writes them as bf16. Linear block b belongs to tile b // (tm / RED_ROWS) (the
    dependency's scale)."""
    subs = c.tm // RED_ROWS
    ntiles = tiles[0] * tiles[1]
    rk = wl.kernels.add(name=name, grid_x=subs, grid_y=ntiles, threads_per_block=256, regs_per_thread=32)
    p = Program(rk)
    # tile t = by: column t % gx (affine only within a row of tiles; the modulo keeps the
    # addresses in the buffer, the bytes moved are exact)
    p.loop(split)
    p.ins(isa.LD, is_async=True, buffer=ws,
          addr=affine(0, bx=RED_ROWS * N * 4, by=c.tn * 4, loops=(M * N * 4,), mod=M * N * 4 * split),
          rows=RED_ROWS, row_bytes=c.tn * 4, row_stride=N * 4)
    p.end()
    p.ins(isa.WAIT, count=0)
    p.ins(isa.ALU, elements=RED_ROWS * c.tn * split, flops_per_element=1.0)
    p.ins(isa.ST, buffer=out, addr=affine(0, bx=RED_ROWS * N * ELEM, by=c.tn * ELEM, mod=M * N * ELEM),
          rows=RED_ROWS, row_bytes=c.tn * ELEM, row_stride=N * ELEM)
    return rk


def gemm(M: int, N: int, K: int, num_sms: int = 132, config: GemmConfig | None = None,
         params: GpuParams | dict | None = None, name: str | None = None, device_sms: int | None = None):
    """A single-GPU bf16 GEMM C[M,N] = A[M,K] x B[K,N] (B stored [N,K]).

    `config`: the plan (a recorded cuBLAS launch: harness.gpu.cublas_plans.recorded_cublas_plan);
    None: the heuristic choose_gemm for num_sms SMs, with stream-K grids of device_sms CTAs when
    given."""
    c = config or choose_gemm(M, N, K, num_sms, params, device_sms)
    wl = new_workload(name or f"gemm_{M}x{N}x{K}")
    a = add_buffer(wl, "A", M * K * ELEM)
    b = add_buffer(wl, "B", N * K * ELEM)
    out = add_buffer(wl, "C", M * N * ELEM)
    gx, gy = math.ceil(N / c.tn), math.ceil(M / c.tm)
    if c.schedule == "persistent":
        _persistent_gemm(wl, M, N, K, c, a, b, out)
        return wl
    if c.schedule == "streamk":
        _streamk_gemm(wl, M, N, K, c, a, b, out)
        return wl
    if c.schedule != "dp":
        raise ValueError(f"unknown GEMM schedule '{c.schedule}'")
    if c.split == 1:
        _gemm_kernel(wl, "gemm", M, N, K, 0, K, c, a, b, out, ELEM)
        wl.launches.add(kernel=0, stream=0)
        return wl
    ws = add_buffer(wl, "workspace", c.split * M * N * 4, dtype=isa.FP32)
    kl = math.ceil(math.ceil(K / c.split) / TK) * TK
    slices = []
    for s in range(c.split):
        k0 = s * kl
        if k0 >= K:
            break
        _gemm_kernel(wl, f"gemm_slice{s}", M, N, K, k0, min(kl, K - k0), c, a, b, ws, 4, out_base=s * M * N * 4)
        wl.launches.add(kernel=len(wl.kernels) - 1, stream=1 + s)
        slices.append(len(wl.launches) - 1)
    _reduce_kernel(wl, "splitk_reduce", M, N, c, ws, out, len(slices), (gx, gy))
    la = wl.launches.add(kernel=len(wl.kernels) - 1, stream=1 + c.split, priority=-1)
    for li in slices:  # fix-up block b waits for its tile's block in every slice (TB-level dependency)
        la.deps.add(producer=li, scale_num=1, scale_den=c.tm // RED_ROWS, lo=0, hi=0)
    return wl
