"""The library's parametric GEMM: one data-parallel tile kernel (CUTLASS/cuBLAS structure, the
calibrated model of harness.gpu.kernels) whose tiles take their A operand and send their result
in whatever way a scheme needs.

A block computes the tm x tn tile (bx, by) of C[M, N] = A[M, K] x B[K, N] in a pipelined K loop
and then runs its epilogue. Operand sources for A (`Source.kind`):
  local   A [M, K] in local memory;
  remote  A row-sharded over the GPUs (owner of rows r: r // owner_rows), plain remote loads
          (READ_REQ/READ_RESP) of the rows other GPUs own;
  cais    the same addresses through ld.cais (GPU-invariant: the CAIS compiler's rewrite).
A weight gradient's gathered operand is sharded along K instead (`Source.along_k`: the tokens,
T/N per GPU): K step L comes from the GPU owning tokens [64 L, 64 L + 64), stored token-major
(X [T, M] for A = X^T). Where T/N is not whole steps (Fig 17's 288 tokens per GPU) a step
straddles two owners, so each step loads in parts of gcd(64, T/N) tokens (32 for 288), each
part from its own owner; where M is not whole tiles the last tile's part of X is clipped to M.
Result sinks (`Sink.kind`):
  local      C [M, N] in local memory;
  red_cais   partial tile reduced into its owner's row shard [owner_rows, N] with red.cais;
  red_remote the same reduction as a plain remote atomic add (red.global.add on the owner's
             address, RED_REMOTE): the source form of a GEMM-RS, which the CAIS compiler
             (harness.compiler) rewrites to red.cais; the owner's own tile is a local add;
  st_remote  partial tile written (remote store) into slot g of the owner's staging buffer
             [gpus x owner_rows, N] (FuseLib's zero-copy direct reduce-scatter);
  none       nothing stored (a consumer of the tile lives in the same block).
A row-sharded GEMM whose shard is not whole tiles (Fig 17's 288 rows per GPU in 128-row tiles)
gets CUTLASS's edge tiles: the grid is ceil(shard / tm) tiles per shard, so no tile straddles two
owners, and each instruction that moves rows carries rows_in_bounds (isa.proto): the last tile
of a shard moves only its in-bounds rows, as TMA's bounds check and a predicated epilogue do; a
plain GEMM whose M spans several tiles, not whole ones, is one such shard. Where N spans several
tiles, not whole ones, the last column of tiles is clipped the same way (its C columns,
Instr.row_bytes_in_bounds, and its B rows). The mma of an edge tile is the mean over
its tiles (harness.gpu.kernels, the calibrated model), so only which tile moves a byte differs
from the mean-extent tiles of validate_kernels' GEMMs, not how many bytes move.
After its store a block can signal a flag (`Signal`): a chunk counter on this GPU (CoCoNet's
tile-status map) or a per-tile flag on the owner (FuseLib), so a communication kernel or the
owner can wait for exactly the tiles it needs.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from harness.gpu import kernels as calibrated
from harness.gpu.isa_text import isa
from harness.kernels.builder import WorkloadBuilder, affine, rotated
from harness.workload.models import ELEM_BYTES as ELEM

TK = calibrated.TK


@dataclass(frozen=True)
class Source:
    kind: str = "local"     # local | remote | cais
    owner_rows: int = 0     # rows of A each GPU owns (remote, cais)
    # The operand is sharded along K, owner_rows tokens per GPU, and stored token-major (module
    # docstring): a weight gradient's re-gathered activation.
    along_k: bool = False


@dataclass(frozen=True)
class Sink:
    kind: str = "local"     # local | red_cais | red_remote | st_remote | none
    owner_rows: int = 0     # rows of C each GPU owns (red_cais, red_remote, st_remote)


@dataclass(frozen=True)
class Signal:
    flags: int              # flag buffer
    where: str = "local"    # local: this GPU's counter; owner: the tile's owner's flag
    rows_per_flag: int = 0  # flag of a tile = its first row // rows_per_flag (0: one flag per tile)
    value: int = 1
    owner_local: bool = False  # one flag per tile, numbered within the owner's row shard
    base: int = 0           # byte offset of this GEMM's flags in the flag buffer


SOURCES = ("local", "remote", "cais")
SINKS = ("local", "red_cais", "red_remote", "st_remote", "none")
REDUCING_SINKS = {"red_cais": isa.RED_CAIS, "red_remote": isa.RED_REMOTE}


def plan(M: int, N: int, K: int, num_sms: int, row_multiple: int = 0, gpu_params=None) -> calibrated.GemmConfig:
    """The tile shape of a data-parallel launch, chosen by the calibrated heuristic among
    one-kernel (no split-K) plans; with a row-sharded operand or result the tile rows must
    divide the shard (row_multiple)."""
    best = None
    for c in calibrated.candidates(M, N, K, num_sms):
        if c.split != 1 or c.schedule != "dp" or (row_multiple and row_multiple % c.tm):
            continue
        t = calibrated.estimate_gemm_us(M, N, K, num_sms, c, gpu_params)
        if best is None or t < best[0] - 1e-9:
            best = (t, c)
    if best is None:
        return calibrated.GemmConfig(64 if row_multiple and row_multiple % 128 else 128, 128)
    return best[1]


def tiles_per_shard(tm: int, shard_rows: int) -> int:
    """Row tiles of one row shard: the last one is an edge tile when tm does not divide it."""
    return math.ceil(shard_rows / tm)


def _owner_terms(e, tm: int, owner_rows: int, row_bytes: int):
    """e + (row block by's offset inside its owner's shard): (by - owner*tiles_per_shard)*tm*row_bytes."""
    tpo = tiles_per_shard(tm, owner_rows)
    e.block_y += tm * row_bytes
    e.quotient.add(block_y=1, divisor=tpo, scale=-tpo * tm * row_bytes)
    return e


def _owner(tm: int, owner_rows: int):
    a = affine(0)
    a.quotient.add(block_y=1, divisor=tiles_per_shard(tm, owner_rows), scale=1)
    return a


def _shard_row_terms(e, tm: int, shard_rows: int, row_bytes: int):
    """e + the first row of tile row by in a tensor of whole shards tiled per shard:
    (by*tm + shard*(shard_rows - tiles_per_shard*tm)) rows."""
    tpo = tiles_per_shard(tm, shard_rows)
    e.block_y += tm * row_bytes
    if tpo * tm != shard_rows:
        e.quotient.add(block_y=1, divisor=tpo, scale=(shard_rows - tpo * tm) * row_bytes)
    return e


def rows_in_bounds(tm: int, shard_rows: int, axis: str = "by"):
    """The in-bounds rows of tile t (the block index on `axis`) of a tensor tiled per shard:
    shard_rows - tm*(t mod tiles_per_shard), which the engine clips to the tile; None when every
    tile is whole."""
    if shard_rows % tm == 0:
        return None
    tpo = tiles_per_shard(tm, shard_rows)
    key = {"by": "block_y", "bx": "block_x"}[axis]
    a = affine(shard_rows, **{axis: -tm})
    a.quotient.add(**{key: 1}, divisor=tpo, scale=tm * tpo)
    return a


def _clipped(kw: dict, in_rows) -> dict:
    if in_rows is not None:
        kw["rows_in_bounds"] = in_rows
    return kw


def gemm(b: WorkloadBuilder, name: str, M: int, N: int, K: int, *, a: int, w: int, out: int,
         source: Source = Source(), sink: Sink = Sink(), signal: Signal | None = None,
         config: calibrated.GemmConfig | None = None, num_sms: int | None = None,
         shard: tuple[int, int] | None = None, wait: tuple | None = None,
         w_owner_rows: int = 0, row_shard: int = 0) -> tuple[int, calibrated.GemmConfig]:
    """Add the GEMM kernel to `b`; returns (kernel index, tile config).

    shard = (shard_rows, shift): the M rows of this GEMM are shard (g + shift) mod N of local A
    and C buffers of N shards (a ring step's chunk, T3's row-chunk GEMMs). wait = (flags, addr,
    value): every block first waits for that flag (a chunk's arrival). w_owner_rows: the weights
    B [N, K] are spread over the GPUs by rows of N (GPU o holds rows [o w, (o+1) w)) and a block
    loads its B tile with plain remote loads from the GPU holding the tile's first row (LADM's
    column placement). row_shard: M is whole shards of this many rows (the gathered tensor of an
    AG-GEMM): tiles never straddle two shards, edge tiles are clipped (module docstring)."""
    if shard and (source.kind != "local" or sink.kind not in ("local", "none")):
        raise ValueError(f"gemm '{name}': a shard GEMM reads and writes local buffers")
    if source.kind not in SOURCES:
        raise ValueError(f"gemm '{name}': unknown source '{source.kind}'")
    if sink.kind not in SINKS:
        raise ValueError(f"gemm '{name}': unknown sink '{sink.kind}'")
    if source.along_k and (source.kind == "local" or K % TK or w_owner_rows or shard or row_shard):
        raise ValueError(f"gemm '{name}': an operand sharded along K needs a remote source whose K {K} is whole "
                         f"{TK}-token steps, on an otherwise plain GEMM")
    sharded = [r for r in (source.owner_rows if source.kind != "local" and not source.along_k else 0,
                           sink.owner_rows if sink.kind in ("red_cais", "red_remote", "st_remote") else 0,
                           row_shard) if r]
    row_multiple = math.gcd(*sharded) if sharded else 0
    c = config or plan(M, N, K, num_sms or b.num_sms, row_multiple)
    if not row_multiple and not shard and M > c.tm and M % c.tm:
        # M rows over several tiles, not whole ones: one shard, its last tile a clipped edge tile
        # (one tile of M rows already moves just its rows: the mean extent below)
        row_multiple = M
    edge = bool(row_multiple) and row_multiple % c.tm != 0  # the shard ends in an edge tile
    if row_multiple and not edge and M % c.tm:
        raise ValueError(f"gemm '{name}': tile rows {c.tm} must divide the row shard {row_multiple} and M {M}")
    if edge and (M % row_multiple or len(set(sharded)) > 1 or shard):
        raise ValueError(f"gemm '{name}': edge tiles of {c.tm} rows need M {M} in whole shards of one size "
                         f"(got {sorted(set(sharded))}) and no ring shard")
    tpo = tiles_per_shard(c.tm, row_multiple) if edge else 0
    gx, gy = math.ceil(N / c.tn), (M // row_multiple * tpo if edge else math.ceil(M / c.tm))
    ki, p = b.kernel(name, gx, gy, threads=c.threads, regs=168, smem=c.smem, cluster_ctas=c.cluster_ctas,
                     holds_carveout=True)
    kt = max(1, math.ceil(K / TK))
    lda = K * ELEM
    in_rows = rows_in_bounds(c.tm, row_multiple) if edge else None
    a_rows, b_rows, tm_eff, tn_eff = calibrated._tile_rows(row_multiple if edge else M, N, c)
    if source.kind != "local" or edge:  # a remote tile is fetched whole (no TMA multicast across GPUs);
        a_rows = c.tm                    # an edge tile's A is the whole tile clipped to its rows
    tile_m = c.tm if edge else tm_eff  # rows a local store writes (an edge tile: clipped by in_rows)
    # N over several tiles, not whole ones: the last column of tiles is clipped to the matrix (its
    # B rows and C columns), as TMA does; one tile of N columns already moves just those
    col_edge = gx > 1 and N % c.tn != 0
    b_clip: dict = {}
    c_clip: dict = {}
    if col_edge:
        share = calibrated.b_sharing(c)
        b_rows = c.tn // share
        in_b = affine(0)
        in_b.quotient.add(base=N, block_x=-c.tn, divisor=share, scale=1)
        b_clip = {"rows_in_bounds": in_b}
        c_clip = {"row_bytes_in_bounds": affine(N * ELEM, bx=-c.tn * ELEM)}
        tn_eff = c.tn
    a_op = {"local": isa.LD, "remote": isa.LD_REMOTE, "cais": isa.LD_CAIS}[source.kind]

    # a K step's bytes per row: 64 columns, or K spread evenly over the steps when K is not a
    # multiple of 64 (loads then cover exactly the row; the mma still runs whole 64-wide steps)
    step = TK * ELEM if K % TK == 0 else K // kt * ELEM

    def along_k(shift: int):
        """K step L + shift of A = X^T sharded along K: TK token rows of the tile's tm columns
        from the GPU owning them, at row (L + shift) TK - owner x owner_rows of its shard of X;
        in parts of gcd(TK, owner_rows) rows, none of which straddles two owners."""
        ld = M * ELEM
        part = math.gcd(TK, source.owner_rows)
        # the tile's tm columns of X, the last tile's clipped to M (X^T's rows)
        clip = {"row_bytes_in_bounds": affine(M * ELEM, by=-c.tm * ELEM)} if M % c.tm else {}
        for first in range(shift * TK, (shift + 1) * TK, part):
            peer, addr = affine(0), affine(first * ld, by=c.tm * ELEM, loops=(TK * ld,))
            peer.quotient.add(base=first, loop=[TK], divisor=source.owner_rows, scale=1)
            addr.quotient.add(base=first, loop=[TK], divisor=source.owner_rows, scale=-source.owner_rows * ld)
            p.ins(a_op, is_async=True, read_only=a_op == isa.LD_REMOTE, buffer=a, peer=peer, addr=addr, rows=part,
                  row_bytes=c.tm * ELEM, row_stride=ld, **clip)

    def loads(shift: int):
        off = shift * step
        if source.along_k:
            along_k(shift)
        elif source.kind == "local":
            a_addr = _shard_row_terms(affine(off, loops=(step,)), c.tm, row_multiple, lda) if edge else \
                affine(off, by=c.tm * lda, loops=(step,))
            if shard:
                a_addr = rotated(a_addr, shard[0] * lda, b.gpus, shard[1])
            p.ins(isa.LD, is_async=True, buffer=a, addr=a_addr, rows=a_rows, row_bytes=step, row_stride=lda,
                  **_clipped({}, in_rows))
        else:
            p.ins(a_op, is_async=True, read_only=a_op == isa.LD_REMOTE, buffer=a, peer=_owner(c.tm, source.owner_rows),
                  addr=_owner_terms(affine(off, loops=(step,)), c.tm, source.owner_rows, lda),
                  rows=a_rows, row_bytes=step, row_stride=lda, **_clipped({}, in_rows))
        if w_owner_rows:
            peer = affine(0)
            peer.quotient.add(block_x=c.tn, divisor=w_owner_rows, scale=1)
            addr = affine(off, bx=c.tn * lda, loops=(step,))
            addr.quotient.add(block_x=c.tn, divisor=w_owner_rows, scale=-w_owner_rows * lda)
            p.ins(isa.LD_REMOTE, is_async=True, read_only=True, buffer=w, peer=peer, addr=addr, rows=b_rows,
                  row_bytes=step, row_stride=lda, **b_clip)
        else:
            p.ins(isa.LD, is_async=True, buffer=w, addr=affine(off, bx=c.tn * lda, loops=(step,)),
                  rows=b_rows, row_bytes=step, row_stride=lda, **b_clip)

    if wait is not None:
        p.ins(isa.FLAG_WAIT, buffer=wait[0], addr=wait[1], value=wait[2])
    # an edge tile's mma: the mean over a shard's tiles, as the library does over M's
    calibrated._k_pipeline(p, c, kt, min(c.stages - 1, kt), loads,
                           calibrated._mma_shape(row_multiple if edge else M, N, c))
    ldc = N * ELEM
    if sink.kind == "local":
        c_addr = _shard_row_terms(affine(0, bx=c.tn * ELEM), c.tm, row_multiple, ldc) if edge else \
            affine(0, bx=c.tn * ELEM, by=c.tm * ldc)
        if shard:
            c_addr = rotated(c_addr, shard[0] * ldc, b.gpus, shard[1])
        p.ins(isa.ST, buffer=out, addr=c_addr, rows=tile_m,
              row_bytes=tn_eff * ELEM, row_stride=ldc, **_clipped(dict(c_clip), in_rows))
    elif sink.kind in REDUCING_SINKS:
        p.ins(REDUCING_SINKS[sink.kind], buffer=out, peer=_owner(c.tm, sink.owner_rows),
              addr=_owner_terms(affine(0, bx=c.tn * ELEM), c.tm, sink.owner_rows, ldc),
              rows=c.tm, row_bytes=tn_eff * ELEM, row_stride=ldc, **_clipped(dict(c_clip), in_rows))
    elif sink.kind == "st_remote":  # slot g of the owner's staging buffer
        slot = sink.owner_rows * ldc
        p.ins(isa.ST_REMOTE, buffer=out, peer=_owner(c.tm, sink.owner_rows),
              addr=_owner_terms(affine(0, bx=c.tn * ELEM, g=slot), c.tm, sink.owner_rows, ldc),
              rows=c.tm, row_bytes=tn_eff * ELEM, row_stride=ldc, **_clipped(dict(c_clip), in_rows))
    if signal is not None:
        if signal.rows_per_flag:
            whole = signal.rows_per_flag == M  # one flag for every tile, an edge tile's too
            if not whole and (signal.rows_per_flag % c.tm or (edge and signal.rows_per_flag != c.tm)):
                raise ValueError(f"gemm '{name}': a flag's rows {signal.rows_per_flag} must be whole tiles of {c.tm}")
            addr = affine(signal.base)
            addr.quotient.add(block_y=1, divisor=math.ceil(signal.rows_per_flag / c.tm), scale=8)
        elif signal.owner_local:  # tile (bx, by mod tiles-per-owner) of the owner's shard
            owner_rows = sink.owner_rows or source.owner_rows
            addr = affine(signal.base, bx=8, by=8 * gx)
            tpo = tiles_per_shard(c.tm, owner_rows)
            addr.quotient.add(block_y=1, divisor=tpo, scale=-8 * gx * tpo)
        else:
            addr = affine(signal.base, bx=8, by=8 * gx)
        if signal.where == "local":
            p.ins(isa.FLAG_SIGNAL, buffer=signal.flags, addr=addr, value=signal.value, scope=isa.LOCAL)
        else:
            p.ins(isa.FLAG_SIGNAL, buffer=signal.flags, addr=addr, value=signal.value, scope=isa.REMOTE,
                  peer=_owner(c.tm, sink.owner_rows or source.owner_rows))
    return ki, c
