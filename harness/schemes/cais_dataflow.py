"""What the CAIS schemes share: the graph-level dataflow optimizer (spec 3.6) over the CAIS ISA
(ld.cais / red.cais, spec 3.2) with merging-aware TB coordination (spec 3.5).

Each sub-layer chain GEMM-RS -> LN -> AG-GEMM (forward L1/L2, backward L3/L4) becomes one
pipeline released thread block by thread block:
  GEMM-RS  every tile's partial goes to its row owner with red.cais (the owner's own partial
           stays local); a local counter per 128-row block counts this GPU's tiles of it; the
           owner's shard buffer counts the CAIS_RED contributions that land per row block
           (Buffer.arrival_region_bytes). Tiles are handed out in the same order on every GPU
           (the TB groups that merge), home-interleaved tile by tile: tile (r, c) of every
           owner, then (r, c + 1) (Kernel.row_interleave, interleave_blocks), so the reductions
           in flight spread over all homes' switch ports, and every GPU posts the same number of
           remote tiles in each wave (its own home's tiles stay local). Interleaved by whole
           rows of tiles instead, a wave held 16 tiles of each of 4 homes: the 4 GPUs owning them
           posted a quarter fewer tiles, ran ahead, and the merge tables held the gap
           (docs/RESULTS.md, "The lowerings tried").
  rs gate  one-warp block per row block of the owner's shard: waits until its own tiles are
           done and (N-1) x the block's bytes have landed (spec A17: home-side counters).
  LN       one block per row, TB dependency on its row block's gate (not on the whole kernel).
  publish  one-warp block per row block, TB dependency on the block's 128 LN rows: a ready flag
           to every GPU (spec A17's multicast flag, as N-1 flag writes plus the local one).
  ag gate  one-warp block per row block of the whole tensor, waits for that ready flag.
  AG-GEMM  A rows through ld.cais from their owner in the K loop; tile row by waits (TB
           dependency) for the ag gate of its rows, so consumer tiles start while the producer
           still runs. The requester's L2 keeps the remote chunks for the launch (spec A7,
           gpu.cache_remote_reads): the row's tiles ask for the same chunk together, one fetch
           leaves the GPU and the others join it, so each chunk leaves its owner once per GPU.
           Tiles starting their K loops at staggered steps (each chunk fetched by one tile, the
           others hitting L2 later) were 11 % faster on 8 GPUs (LLaMA-7B L1 inference 686 ->
           611 µs) but overflowed the merge tables from 16 GPUs on (16 GPUs: 1401 -> 1602 µs,
           5.9 M bypasses; 32: 3433 -> 6178 µs), and raised Fig 13's coordinated table size.
The gates are resident one-warp waiters (like T3's trigger blocks): the TB scheduler holds the
consumer blocks through ordinary TB dependencies on them, since those are local to a GPU. They
stand for that scheduler-side hold (spec 3.6 (1): "the TB scheduler holds the consumer TB until
its flag is set"; the paper's GPU synchroniser logic), so they take no registers or shared
memory: with 32 registers per thread, one gate kept a GEMM tile that fills an SM's register file
off its SM (MegaGPT-4B L2: 889 -> 675 µs without them).

Asymmetric kernel overlap (spec 3.6 (2)): the producer runs on every SM at a higher priority
than the consumer, whose tiles take SMs as soon as their rows are ready and no producer tile
waits for one, so the two overlap from the producer's tail on, with the consumer's loads
beside the producer's reductions. A static SM split (the producer on alpha = W_RS / (W_RS +
W_AG) of the SMs, the engine cannot re-partition at run time) measured slower on LLaMA-7B L1
(docs/SCHEMES.md), so it is not used. The consumer and the gathers use the producer's
home-interleaved row order.

A shard that is not whole row blocks (Fig 17: 288 rows per GPU = 2 x 128 + 32) ends in a partial
row block: the GEMMs' tiles are 128 rows, laid out per owner with a clipped edge tile (the
library GEMM's edge tiles, harness.kernels.gemm), the gathers clip their last block the same
way, and the gates wait for the partial block's own count of bytes (flag.wait wait_for).

A weight gradient's re-gather (spec A5) is an ld.cais in the wgrad GEMM's K loop: the gathered
activation is sharded along K (the tokens), so K step L comes from the owner of tokens
[64 L, 64 L + 64) (gemm Source.along_k), once every owner has flagged all its rows; where a step
straddles two owners (Fig 17's 288 tokens per GPU) it loads in 32-token parts. LLaMA-7B half
training layer against the copy kernels: 4654 -> 4468 µs, MegaGPT-4B / 8B 3426 -> 3508 /
4267 -> 4409 µs (docs/RESULTS.md, Fig 11): the wgrads' tiles hold their SMs through the loads,
as the copies did.
A gathered output gradient, which a dgrad AG-GEMM and a wgrad both read, is materialised once by
a copy kernel that ld.cais's each row block from its owner; both GEMMs then read it locally. A
copy block's 64 KiB tile is staged in shared memory (128 threads x 32 registers hold 16 KiB), so
three fit on an SM, and its blocks are handed out tile by tile over the owners like the
producer's.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from harness.compiler import Coordination, compile_cais
from harness.errors import ConfigError
from harness.gpu.isa_text import isa
from harness.kernels import gemm as gemm_kernel
from harness.kernels.builder import affine
from harness.kernels.flags import signal_peers
from harness.kernels.gemm import Signal, Sink, Source, plan, rows_in_bounds
from harness.schemes import SchemeParams
from harness.schemes.lowering import Lowering
from harness.workload.graph import Collective, Gemm, Graph, Norm, Op
from harness.workload.models import ELEM_BYTES as ELEM

BLOCK_ROWS = 128     # rows of one readiness unit (a row block): the CUTLASS tile rows of spec A8
# stream priorities (higher dispatches first): waiters must find a slot, LN rows must not queue
# behind GEMM tiles, the producer keeps its partition ahead of the consumer
PRIO_GATE, PRIO_LN, PRIO_RS, PRIO_AG, PRIO_OTHER = 4, 3, 2, 1, 0
GATHER_ROW_BYTES = 512  # bytes of a row one gather block copies (128 rows x 512 B = 64 KiB per block,
                        # staged in shared memory: the block's registers hold a quarter of it)


@dataclass
class CaisParams(SchemeParams):
    pre_launch_sync: bool = True
    """Pre-launch TB-group synchronisation of the .cais kernels (spec 3.5 step 1)."""
    pre_access_sync: bool = True
    """Pre-access synchronisation: CAIS_SYNC before a TB's first .cais instruction (step 2)."""
    throttle: bool = True
    """TB-aware request throttling (step 3); conf/scheme sets net.cais_merge.throttle (the
    switch's THROTTLE feedback, parts 1-3) and net.cais_merge.outstanding_cap (the per-GPU cap
    of outstanding mergeable lines, part 4) from it."""


def block_count(shard_rows: int, per_row: int, axis: str = "by") -> dict:
    """flag.wait fields for the count a row block of a shard reaches: per_row x its rows, which
    are BLOCK_ROWS except in a partial last block (the block index on `axis`, R blocks):
    last + (BLOCK_ROWS - last) x [block < R - 1], with [block < R - 1] = floor((2R - 2 - block) / R)."""
    R = math.ceil(shard_rows / BLOCK_ROWS)
    last = shard_rows - (R - 1) * BLOCK_ROWS
    if last == BLOCK_ROWS:
        return {"value": per_row * BLOCK_ROWS}
    a = affine(per_row * last)
    a.quotient.add(base=2 * R - 2, **{"block_x" if axis == "bx" else "block_y": -1}, divisor=R,
                   scale=per_row * (BLOCK_ROWS - last))
    return {"value_of_block": a}


class CaisLowering(Lowering):
    def __init__(self, graph: Graph, target, params: CaisParams, scheme: str):
        super().__init__(graph, target, scheme)
        self.scheme = scheme
        self.coord = Coordination(params.pre_launch_sync, params.pre_access_sync)
        self.source_form: list[int] = []  # kernels the CAIS compiler rewrites at finish()
        self.done: dict[str, tuple[int, ...]] = {}        # op -> launches whose end is the op's end
        self.shard_ready: dict[str, tuple[int, int]] = {}  # op -> (launch, its blocks per row block)
        self.ag_gate: dict[str, int] = {}                 # AG op -> gate launch (row r of blocks = row block r)
        self.ag_src: dict[str, int] = {}                  # AG op -> the shard buffer it gathers
        self.chain_after: dict[str, tuple[int, ...]] = {}  # TB-released op -> what its chain waits for
        self._streams = 0

    # ---- helpers
    def plain_remote(self, build) -> int:
        """A kernel in its source form, as a programmer writes it: cross-GPU loads as plain remote
        loads, partial-tile reductions as plain remote atomic adds (`build(load_kind,
        reduce_kind)` adds it with those gemm Source / Sink kinds). finish() runs the CAIS
        compiler over every such kernel once all launches exist."""
        ki = build("remote", "red_remote")
        self.source_form.append(ki)
        return ki

    def finish(self):
        report = compile_cais(self.b, self.source_form, coordination=self.coord)
        for k in report.kernels:  # every access these kernels make across GPUs is GPU-invariant
            if k.refused or k.of("refused") or not k.of("rewritten"):
                raise RuntimeError(f"CAIS compiler left kernel '{k.name}' uncompiled:\n{report.text()}")
        return super().finish()

    def stream(self, priority: int, sm_first: int = 0, sm_count: int = 0):
        """A stream of its own per launch: order comes from `after` and TB dependencies, and no
        launch pays a stream's launch gap behind an unrelated one."""
        self._streams += 1
        return self.b.stream(f"s{self._streams}", priority, sm_first, sm_count)

    def after(self, op: Op) -> tuple[int, ...]:
        return tuple(sorted({li for d in op.deps for li in self.done.get(d, ())}))

    def row_blocks(self, name: str, rows: int) -> int:
        """Row blocks of a shard of `rows` rows, the last one partial when BLOCK_ROWS does not divide it."""
        if rows <= 0:
            raise ConfigError("scheme", f"{self.scheme} needs at least one token row per GPU; {name} has {rows} "
                              "rows (model tokens / system.gpus)")
        return math.ceil(rows / BLOCK_ROWS)

    def tiles(self, op: Gemm):
        """Tile shape of a GEMM over row shards: tile rows divide a row block (a shard that is not
        whole blocks gets 128-row tiles whose last one per shard is an edge tile)."""
        c = plan(op.M, op.N, op.K, self.t.num_sms, BLOCK_ROWS)
        if (op.M // self.t.gpus) % BLOCK_ROWS and c.tm != BLOCK_ROWS:
            raise ConfigError("scheme", f"{self.scheme}: {op.name} has no {BLOCK_ROWS}-row tile for its partial row block")
        return c

    def waiter(self, name: str, blocks: int):
        ki, p = self.b.kernel(name, 1, blocks, threads=32, regs=0)
        return ki, p

    def ag_gemms(self, ag: str) -> list[Gemm]:
        return [o for o in self.g.consumers(ag) if isinstance(o, Gemm) and o.a_gathered and o.deps == (ag,)]

    # ---- GEMM-RS and its gate
    def gemm_rs(self, op: Gemm, rs: Collective) -> None:
        G = self.t.gpus
        owner_rows, ldc = op.M // G, op.N * ELEM
        R = self.row_blocks(rs.name, owner_rows)
        out = self.out_of(rs)  # the owner's reduced shard: zero, then its own partial and the merged sums
        arrivals = self.b.flags(f"{rs.name}.arrived", R)
        buf = self.b.wl.buffers[out]
        buf.arrival_region_bytes, buf.arrival_flag_buffer = BLOCK_ROWS * ldc, arrivals
        c = self.tiles(op)
        gx = math.ceil(op.N / c.tn)
        tiles = self.b.flags(f"{op.name}.tiles", G * R)  # this GPU's finished tiles per row block
        a = self.tensor(f"{op.name}.saved_act", op.M * op.K * ELEM) if op.wgrad else self.input_of(op, op.M * op.K * ELEM)
        w = self.tensor(f"{op.name}.w", op.N * op.K * ELEM)
        after = self.after(op)

        def build(_load, reduce_kind):
            ki, _ = gemm_kernel.gemm(self.b, op.name, op.M, op.N, op.K, a=a, w=w, out=out,
                                     sink=Sink(reduce_kind, owner_rows), config=c,
                                     signal=Signal(tiles, "local", rows_per_flag=BLOCK_ROWS))
            return ki
        ki = self.plain_remote(build)
        self.b.wl.kernels[ki].row_interleave = G  # home-interleaved tile order (module docstring)
        self.b.wl.kernels[ki].interleave_blocks = True
        launches = (self.launch(op, ki, self.stream(PRIO_RS), after=after),)
        self.done[op.name] = launches
        ki, p = self.waiter(f"{rs.name}.gate", R)  # row block by of this GPU's shard
        p.ins(isa.FLAG_WAIT, buffer=tiles, addr=affine(0, g=8 * R, by=8), value=gx * (BLOCK_ROWS // c.tm))
        p.ins(isa.FLAG_WAIT, buffer=arrivals, addr=affine(0, by=8), **block_count(owner_rows, (G - 1) * ldc))
        gate = self.launch(rs, ki, self.stream(PRIO_GATE), after=after)
        self.done[rs.name] = (gate,)
        self.chain_after[rs.name] = after
        self.shard_ready[rs.name] = (gate, 1)

    # ---- LN released per row block
    def norm_after_rs(self, op: Norm) -> None:
        gate, _ = self.shard_ready[op.deps[0]]
        dep = {"producer": gate, "scale_num": 1, "scale_den": BLOCK_ROWS, "lo": 0, "hi": 0}
        after = self.chain_after[op.deps[0]]
        li = self.norm(op, self.stream(PRIO_LN), after=after, deps=(dep,))
        self.done[op.name] = (li,)
        self.shard_ready[op.name] = (li, BLOCK_ROWS)
        self.chain_after[op.name] = after

    # ---- AllGather: ready flags, gates, consumers
    def all_gather(self, ag: Collective) -> None:
        G = self.t.gpus
        shard_rows, ldh = ag.rows // G, ag.cols * ELEM
        R = self.row_blocks(ag.name, shard_rows)
        src_name = ag.source
        src = self.shard_of(ag)
        ready = self.b.flags(f"{ag.name}.ready", G * R)
        ki, p = self.waiter(f"{ag.name}.publish", R)  # row block by of this GPU's shard is written
        flag = affine(0, g=8 * R, by=8)
        signal_peers(p, ready, flag, G)
        p.ins(isa.FLAG_SIGNAL, buffer=ready, addr=flag, value=1, scope=isa.LOCAL)
        if not ag.data and src_name in self.shard_ready:  # TB-level: the LN rows (or reduced rows) of the block
            prod, per = self.shard_ready[src_name]
            dep = {"producer": prod, "key": isa.ROW, "scale_num": 1, "scale_den": 1, "lo": 0, "hi": 0} if per == 1 else \
                {"producer": prod, "scale_num": per, "scale_den": 1, "lo": 0, "hi": per - 1}
            after = self.chain_after[src_name]
            self.launch(ag, ki, self.stream(PRIO_GATE), after=after, deps=(dep,))
        else:  # the source was written by an earlier kernel (a re-gather of a saved activation)
            after = self.after(ag)
            self.launch(ag, ki, self.stream(PRIO_GATE), after=after)
        gi, p = self.waiter(f"{ag.name}.gate", G * R)  # row block by of the whole tensor is ready
        p.ins(isa.FLAG_WAIT, buffer=ready, addr=affine(0, by=8), value=1)
        gate = self.launch(ag, gi, self.stream(PRIO_GATE), after=after)
        self.ag_gate[ag.name], self.ag_src[ag.name], self.chain_after[ag.name] = gate, src, after
        self.done[ag.name] = (gate,)

    def gather(self, ag: Collective) -> None:
        """The gathered tensor in local memory: each row block's lines loaded once from its
        owner with ld.cais, in column chunks of at most GATHER_ROW_BYTES per row (one block
        each), released by the row block's ready flag: for a gathered tensor that more than an
        AG-GEMM reads (module docstring)."""
        G, src, gate = self.t.gpus, self.ag_src[ag.name], self.ag_gate[ag.name]
        R = self.row_blocks(ag.name, ag.rows // G)
        ldh = ag.cols * ELEM
        chunk = math.gcd(ldh, GATHER_ROW_BYTES)
        full = self.tensor(ag.name, ag.bytes)
        shard_rows = ag.rows // G
        in_rows = rows_in_bounds(BLOCK_ROWS, shard_rows)  # the partial last block of each owner
        dst = affine(0, bx=chunk, by=BLOCK_ROWS * ldh)  # block by's first row in the gathered tensor
        if in_rows is not None:
            dst.quotient.add(block_y=1, divisor=R, scale=(shard_rows - R * BLOCK_ROWS) * ldh)

        def build(load_kind, _reduce):
            ki, p = self.b.kernel(f"{ag.name}.gather", ldh // chunk, G * R, threads=128, regs=32, smem=BLOCK_ROWS * chunk)
            peer, addr = affine(0), affine(0, bx=chunk, by=BLOCK_ROWS * ldh)
            peer.quotient.add(block_y=1, divisor=R, scale=1)
            addr.quotient.add(block_y=1, divisor=R, scale=-R * BLOCK_ROWS * ldh)
            op = {"cais": isa.LD_CAIS, "remote": isa.LD_REMOTE}[load_kind]
            clip = {"rows_in_bounds": in_rows} if in_rows is not None else {}
            p.ins(op, read_only=True, buffer=src, peer=peer, addr=addr, rows=BLOCK_ROWS, row_bytes=chunk, row_stride=ldh,
                  reg=1, **clip)
            p.ins(isa.ST, buffer=full, addr=dst, rows=BLOCK_ROWS, row_bytes=chunk, row_stride=ldh, reg=1, **clip)
            return ki
        ki = self.plain_remote(build)
        self.b.wl.kernels[ki].row_interleave = G  # tile (r, c) of every owner, then (r, c + 1): the producer's order
        self.b.wl.kernels[ki].interleave_blocks = True
        dep = {"producer": gate, "key": isa.ROW, "scale_num": 1, "scale_den": 1, "lo": 0, "hi": 0}
        self.done[ag.name] = (self.launch(ag, ki, self.stream(PRIO_LN), after=self.chain_after[ag.name], deps=(dep,)),)

    def ag_gemm(self, op: Gemm) -> None:
        """Tile row by starts when its gathered rows are ready: loaded by the tile itself with
        ld.cais from the owner in its K loop, or, when another kernel reads the gathered tensor
        too, fetched once by the row block's copy and read locally (module docstring)."""
        ag = self.g.op(op.deps[0])
        owner_rows = op.M // self.t.gpus
        c = self.tiles(op)
        w, out = self.tensor(f"{op.name}.w", op.N * op.K * ELEM), self.out_of(op)
        if self.needs_copy(ag):
            if self.done[ag.name] == (self.ag_gate[ag.name],):
                self.gather(ag)
            (ready,) = self.done[ag.name]
            ki, _ = gemm_kernel.gemm(self.b, op.name, op.M, op.N, op.K, a=self.tensors[ag.name], w=w, out=out, config=c,
                                     row_shard=owner_rows)
        else:
            ready = self.ag_gate[ag.name]

            def build(load_kind, _reduce):
                ki, _ = gemm_kernel.gemm(self.b, op.name, op.M, op.N, op.K, a=self.ag_src[ag.name], w=w, out=out,
                                         source=Source(load_kind, owner_rows), config=c)
                return ki
            ki = self.plain_remote(build)
        self.b.wl.kernels[ki].row_interleave = self.t.gpus  # the producer's row order
        per = c.tm // BLOCK_ROWS
        dep = {"producer": ready, "key": isa.ROW, "scale_num": max(1, per),
               "scale_den": 1 if per else BLOCK_ROWS // c.tm, "lo": 0, "hi": max(0, per - 1)}
        li = self.launch(op, ki, self.stream(PRIO_AG), after=self.chain_after[ag.name], deps=(dep,))
        self.done[op.name] = (li,)

    # ---- weight gradients that gather in their K loop
    def gathered_along_k(self, op: Op) -> Collective | None:
        """The gather a weight-gradient GEMM reads in its K loop (spec A5: the re-gather is an
        ld.cais inside the wgrad GEMM), or None: K not whole 64-token steps, or the gathered dY
        (which a dgrad reads too, so a copy kernel materialises it once)."""
        if not (isinstance(op, Gemm) and op.wgrad):
            return None
        ags = [d for d in op.deps if d in self.ag_gate]
        if len(ags) != 1 or op.sharded == "M" or op.K % gemm_kernel.TK:
            return None  # (sharded M: dW [n/N, h] reads the gathered dY as B, which a dgrad reads too)
        return self.g.op(ags[0])

    def needs_copy(self, ag: Collective) -> bool:
        """A gathered tensor is copied into local memory when more than one kernel reads it
        (module docstring): the output gradients, which a dgrad AG-GEMM and a wgrad read. Both
        loading it in their K loops fetched it twice and overflowed the merge tables (LLaMA-7B
        half training layer with the then staggered K starts: 6200 µs, 3.86 GB of ld.cais
        answers, against 4548 µs and 1.70 GB)."""
        return len([o for o in self.g.consumers(ag.name) if isinstance(o, Gemm)]) > 1

    def wgrad_gemm(self, op: Gemm, ag: Collective) -> None:
        """dW [h, n/N] = X^T dY with X, the re-gathered activation, loaded from its owners in the
        K loop once every owner has flagged all its rows ready (each tile's K loop spans every
        token); the requester's L2 keeps each chunk for the other tiles of its row."""
        owner_rows = ag.rows // self.t.gpus
        w = self.tensor(f"{op.name}.w", op.N * op.K * ELEM)

        def build(load_kind, _reduce):
            ki, _ = gemm_kernel.gemm(self.b, op.name, op.M, op.N, op.K, a=self.ag_src[ag.name], w=w,
                                     out=self.out_of(op), source=Source(load_kind, owner_rows, along_k=True))
            return ki
        ki = self.plain_remote(build)
        self.done[op.name] = (self.launch(op, ki, self.stream(PRIO_OTHER), after=self.after(op)),)

    # ---- the graph
    def lower(self):
        ops = self.g.ops
        for i, op in enumerate(ops):
            if op.name in self.done:
                continue
            nxt = ops[i + 1] if i + 1 < len(ops) else None
            if isinstance(op, Gemm) and op.out_partial:
                if not (isinstance(nxt, Collective) and nxt.kind == "reduce_scatter" and nxt.deps == (op.name,)):
                    raise ValueError(f"cais: partial GEMM '{op.name}' is not followed by its ReduceScatter")
                self.gemm_rs(op, nxt)
            elif isinstance(op, Norm) and op.deps and op.deps[0] in self.shard_ready:
                self.norm_after_rs(op)
            elif isinstance(op, Norm):
                li = self.norm(op, self.stream(PRIO_LN), after=self.after(op))
                self.done[op.name] = (li,)
                self.shard_ready[op.name] = (li, BLOCK_ROWS)
                self.chain_after[op.name] = self.after(op)
            elif isinstance(op, Collective) and op.kind == "all_gather":
                self.all_gather(op)
            elif isinstance(op, Collective):
                raise ValueError(f"cais: collective '{op.name}' ({op.kind}) has no CAIS lowering")
            elif isinstance(op, Gemm) and op.a_gathered and len(op.deps) == 1 and op.deps[0] in self.ag_gate:
                self.ag_gemm(op)
            elif (ag := self.gathered_along_k(op)) is not None and not self.needs_copy(ag):
                self.wgrad_gemm(op, ag)
            else:
                for d in op.deps:
                    if d in self.ag_gate and self.done[d] == (self.ag_gate[d],):
                        self.gather(self.g.op(d))
                self.done[op.name] = (self.plain(op, self.stream(PRIO_OTHER), after=self.after(op)),)
        return self.finish()


def lower_cais(graph: Graph, target, params: CaisParams, scheme: str):
    return CaisLowering(graph, target, params, scheme).lower()
