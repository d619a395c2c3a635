"""NVLS collectives as tile-ISA kernels, following NCCL's NVLS algorithm on one NVSwitch node
(src/device/all_reduce.h, reduce_scatter.h, all_gather.h: RunWorkColl<..., NCCL_ALGO_NVLS, ...>,
the single-node branch; buffers from src/transport/nvls.cc).

NCCL does not reduce in the user's tensor: each channel stages its data in NVLS buffers (a
multicast object) and copies between them and the tensor. A channel is one CTA of 640 threads
whose warps are specialised (one warp group each here, isa.proto Kernel.warp_groups):
  all_reduce      scatter: copy the rank's tensor into the staging buffer `up`; reduce (the rank
                  is the head of its 1/N of every step): multimem.ld_reduce of that part of `up`
                  (the switch sums every member's copy) and multimem.st of the sum into `down` on
                  every member; gather: copy `down` into the tensor.
  reduce_scatter  scatter as above; reduce: multimem.ld_reduce of the rank's part, stored to its
                  shard.
  all_gather      bcast: the rank's shard loaded and multimem.st into `down` on every member;
                  gather as above.
Each group moves a step in rounds of its threads' unrolled 16 B packs (COLL_UNROLL = 8 on sm_90:
warps x 32 x 8 x 16 B, so 32 KiB for 8 warps), loads first, then stores, as NCCL's
reduceCopyPacks does; a step that is not whole rounds ends on a shorter one.
A channel walks its range in steps (NCCL_NVLS_CHUNKSIZE, 128 KiB per head); a staging buffer
holds `slots` steps (NCCL_STEPS), so a producer group runs at most that far ahead of the
consumers that free its slots. Cross-rank flags (one per channel and step, counted to N) say that
every rank has scattered a step (before a head reduces it) and that every head's multicast of a
step has landed (before a rank gathers it).

Layout: rank r's part of the tensor (the one it reduces, or its shard) is the r-th 1/N of it (of
each chunk when `chunks` > 1); channel c takes the c-th 1/C of every part. NCCL interleaves the
heads within each channel's range instead; the engine's memory does not see the difference.
"""
from __future__ import annotations

from dataclasses import dataclass

from harness.gpu.isa_text import isa
from harness.kernels.builder import Program, WorkloadBuilder, affine
from harness.kernels.flags import signal_peers

KINDS = ("all_reduce", "reduce_scatter", "all_gather")
LINE = 128  # bytes: every part is whole NVLink lines


@dataclass(frozen=True)
class NvlsConfig:
    channels: int = 16          # CTAs (NVLS_NCHANNELS_SM90, spec A15)
    step_bytes: int = 131072    # NCCL_NVLS_CHUNKSIZE: what a step moves per head
    slots: int = 8              # NCCL_STEPS: steps a staging buffer holds per channel
    threads: int = 640          # NCCL_MAX_NTHREADS
    unroll: int = 8             # COLL_UNROLL on sm_90 (ncclCollUnroll): 16 B packs a thread has in flight


PACK = 16  # bytes: one 16 B vector (a multimem.ld_reduce of v4.f32 / v8.bf16x2 alike)


def warps(kind: str, gpus: int, cfg: NvlsConfig = NvlsConfig()) -> dict[str, int]:
    """Warps of each warp group, as NCCL splits a channel's NCCL_MAX_NTHREADS without buffer
    registration on one node (RunWorkColl<..., NCCL_ALGO_NVLS, ...>::run)."""
    total = cfg.threads // 32
    if kind == "all_reduce":
        reduce = 7 if gpus <= 6 else 5
        return {"scatter": (total - reduce + 1) // 2, "reduce": reduce, "gather": (total - reduce) // 2}
    if kind == "reduce_scatter":
        return {"scatter": 8, "reduce": total - 8}
    return {"bcast": total - 8, "gather": 8}


def round_bytes(kind: str, gpus: int, group: str, cfg: NvlsConfig = NvlsConfig()) -> int:
    """Bytes a warp group moves per round: its threads' unrolled packs (reduceCopyPacks loads all
    of them, then stores them)."""
    return warps(kind, gpus, cfg)[group] * 32 * cfg.unroll * PACK


def _split(total: int, most: int) -> tuple[int, int]:
    """(count, size): `total` B as `count` equal parts of whole lines, each at most `most` B."""
    n = max(1, -(-total // most))
    while total % n or (total // n) % LINE:
        n += 1
    return n, total // n


@dataclass(frozen=True)
class _Geometry:
    gpus: int
    channels: int
    chunks: int
    region: int      # bytes of one chunk of the tensor (the whole tensor when chunks == 1)
    part: int        # a channel's bytes of one rank's part of a chunk
    steps: int
    step: int        # a step's bytes per head

    def heads_addr(self, base: int, inner: int) -> isa.Affine:
        """Offset in a full-size buffer of (chunk L0, channel bx, step L1) of head L2, plus
        `base` and `inner` bytes per L3: a round of every head's part."""
        return affine(base, bx=self.part, loops=(self.region, self.step, self.region // self.gpus, inner))

    def own_addr(self, base: int, inner: int) -> isa.Affine:
        """The same of this GPU's own part (it heads it), plus `base` and `inner` bytes per L2."""
        return affine(base, g=self.region // self.gpus, bx=self.part, loops=(self.region, self.step, inner))

    def shard_addr(self, base: int, inner: int) -> isa.Affine:
        """Offset of (step L1, round L2) of channel bx in the rank's shard (chunks == 1)."""
        return affine(base, bx=self.part, loops=(0, self.step, inner))


def geometry(nbytes: int, gpus: int, cfg: NvlsConfig, chunks: int = 1) -> _Geometry:
    if nbytes % (chunks * gpus * cfg.channels * LINE):
        raise ValueError(f"NVLS tensor of {nbytes} B does not split into {chunks} chunks x {gpus} GPUs x "
                         f"{cfg.channels} channels of whole {LINE} B lines")
    region = nbytes // chunks
    part = region // (gpus * cfg.channels)
    steps, step = _split(part, cfg.step_bytes)
    return _Geometry(gpus, cfg.channels, chunks, region, part, steps, step)


def _rounds(p: Program, total: int, size: int, body) -> None:
    """`total` bytes in rounds of `size`: a loop over the full rounds (body(base, stride, n) with
    the loop's stride), then the shorter rest (stride 0: no loop around it), as NCCL's unrolled
    loop ends on a partial hunk."""
    full, rest = divmod(total, size)
    if full > 1:
        p.loop(full)
        body(0, size, size)
        p.end()
    elif full == 1:
        body(0, 0, size)
    if rest:
        body(full * size, 0, rest)


def _signal_all(p: Program, flags: int, addr, gpus: int) -> None:
    """Add 1 to the flag at `addr` on every GPU, this one included (another warp group waits)."""
    signal_peers(p, flags, addr, gpus)
    p.ins(isa.FLAG_SIGNAL, buffer=flags, addr=addr, value=1)


class _Flags:
    """Per channel and step: `ready` (every rank scattered it), `landed` (every head's multicast
    of it arrived); per channel: `freed`, the steps whose slots the consumers gave back."""

    def __init__(self, b: WorkloadBuilder, name: str, geo: _Geometry):
        self.g = geo
        self.per_step = geo.chunks * geo.channels * geo.steps
        self.buf = b.flags(f"{name}.flags", 2 * self.per_step + geo.channels)

    def _step(self, which: int):  # chunk L0, channel bx, step L1
        g = self.g
        return affine(8 * which * self.per_step, bx=8 * g.steps, loops=(8 * g.channels * g.steps, 8))

    def ready(self):
        return self._step(0)

    def landed(self):
        return self._step(1)

    def freed(self):
        return affine(16 * self.per_step, bx=8)

    def wait_slot(self, p: Program, cfg: NvlsConfig, per_step: int) -> None:
        """Before the channel's step t = L0 * steps + L1: the consumers have freed step t - slots
        (each consumer adds `per_step` to the count once per step)."""
        g = self.g
        p.ins(isa.FLAG_WAIT, buffer=self.buf, addr=self.freed(),
              value_of_block=affine(per_step * (1 - cfg.slots), loops=(per_step * g.steps, per_step)))


def _copy(p: Program, src: int, dst: int, geo: _Geometry, size: int) -> None:
    """A step of every head copied between two full-size buffers in rounds of `size` (L2 head,
    L3 round): each round's loads, then its stores (posted to L2) while the next round loads."""
    def body(base: int, stride: int, n: int) -> None:
        addr = geo.heads_addr(base, stride)
        p.ins(isa.LD, buffer=src, addr=addr, rows=1, row_bytes=n, reg=1, is_async=True)
        p.ins(isa.WAIT, scope=isa.LOCAL)
        p.ins(isa.ST, buffer=dst, addr=addr, rows=1, row_bytes=n, reg=1, is_async=True)
    p.loop(geo.gpus)
    _rounds(p, geo.step, size, body)
    p.end()


def collective(b: WorkloadBuilder, name: str, kind: str, nbytes: int, *, tensor: int, shard: int = -1,
               cfg: NvlsConfig = NvlsConfig(), chunks: int = 1, wait=None) -> int:
    """Add an NVLS `kind` kernel over `tensor` (nbytes per GPU: the all_reduce's data, in place;
    the reduce_scatter's input; the all_gather's output) and `shard` (the local nbytes/N the
    reduce_scatter writes or the all_gather reads). Returns the kernel index.

    chunks > 1 (all_reduce only) walks the tensor as consecutive chunks, each reduced like a whole
    tensor (CoCoNet-NVLS's chunked overlap); `wait(p)` emits what the scatter group waits for
    before each chunk (e.g. the producer GEMM's tiles of it; L0 is the chunk)."""
    if kind not in KINDS:
        raise ValueError(f"unknown NVLS collective '{kind}'")
    if chunks > 1 and kind != "all_reduce":
        raise ValueError(f"{name}: a chunked NVLS collective is an all_reduce (CoCoNet-NVLS)")
    G = b.gpus
    geo = geometry(nbytes, G, cfg, chunks)
    flags = _Flags(b, name, geo)
    ki, _ = b.kernel(name, cfg.channels, 1, threads=cfg.threads, regs=64, loads_via_l1=True)
    k = b.wl.kernels[ki]
    up = b.buffer(f"{name}.up", nbytes, multicast=True) if kind != "all_gather" else -1
    down = b.buffer(f"{name}.down", nbytes, multicast=True) if kind != "reduce_scatter" else -1

    group_warps = warps(kind, G, cfg)
    rounds = {group: round_bytes(kind, G, group, cfg) for group in group_warps}

    if kind != "all_gather":  # scatter: tensor -> up, then `ready` to every rank
        p = Program(k, "scatter", group_warps["scatter"])
        p.loop(chunks)
        if wait is not None:
            wait(p)
        p.loop(geo.steps)
        # all_reduce: the rank's own gather frees a slot; reduce_scatter: every head's reduce
        flags.wait_slot(p, cfg, 1 if kind == "all_reduce" else G)
        _copy(p, tensor, up, geo, rounds["scatter"])
        p.ins(isa.WAIT, scope=isa.LOCAL)  # the step is in `up` before anyone reads it
        _signal_all(p, flags.buf, flags.ready(), G)
        p.end()
        p.end()

        p = Program(k, "reduce", group_warps["reduce"])  # this rank heads its part of every step

        def reduce(base: int, stride: int, n: int) -> None:
            # posted multicast stores of one round stay in flight while it reads the next
            mine = geo.own_addr(base, stride)
            p.ins(isa.MM_LD_REDUCE, buffer=up, addr=mine, rows=1, row_bytes=n, reg=1, is_async=True)
            p.ins(isa.WAIT, scope=isa.LOCAL)
            if kind == "all_reduce":
                p.ins(isa.MM_ST, buffer=down, addr=mine, rows=1, row_bytes=n, reg=1, is_async=True)
            else:
                p.ins(isa.ST, buffer=shard, addr=geo.shard_addr(base, stride), rows=1, row_bytes=n, reg=1,
                      is_async=True)
        p.loop(chunks)
        p.loop(geo.steps)
        p.ins(isa.FLAG_WAIT, buffer=flags.buf, addr=flags.ready(), value=G)
        _rounds(p, geo.step, rounds["reduce"], reduce)
        if kind == "all_reduce":
            p.ins(isa.WAIT, count=0)  # every member holds the sums before they may gather them
            _signal_all(p, flags.buf, flags.landed(), G)
        else:
            _signal_all(p, flags.buf, flags.freed(), G)  # its reads of every rank's slot are done
        p.end()
        p.end()
    else:  # bcast: shard -> down on every member, then `landed` to every rank
        p = Program(k, "bcast", group_warps["bcast"])

        def bcast(base: int, stride: int, n: int) -> None:
            p.ins(isa.LD, buffer=shard, addr=geo.shard_addr(base, stride), rows=1, row_bytes=n, reg=1,
                  is_async=True)
            p.ins(isa.WAIT, scope=isa.LOCAL)
            p.ins(isa.MM_ST, buffer=down, addr=geo.own_addr(base, stride), rows=1, row_bytes=n, reg=1,
                  is_async=True)
        p.loop(chunks)
        p.loop(geo.steps)
        flags.wait_slot(p, cfg, G)  # every rank's gather has freed the slot
        _rounds(p, geo.step, rounds["bcast"], bcast)
        p.ins(isa.WAIT, count=0)
        _signal_all(p, flags.buf, flags.landed(), G)
        p.end()
        p.end()

    if kind != "reduce_scatter":  # gather: down -> tensor once every head's multicast landed
        p = Program(k, "gather", group_warps["gather"])
        p.loop(chunks)
        p.loop(geo.steps)
        p.ins(isa.FLAG_WAIT, buffer=flags.buf, addr=flags.landed(), value=G)
        _copy(p, down, tensor, geo, rounds["gather"])
        p.ins(isa.WAIT, scope=isa.LOCAL)
        if kind == "all_reduce":
            p.ins(isa.FLAG_SIGNAL, buffer=flags.buf, addr=flags.freed(), value=1)
        else:
            _signal_all(p, flags.buf, flags.freed(), G)
        p.end()
        p.end()
    return ki
